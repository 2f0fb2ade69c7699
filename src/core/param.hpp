// SPDX-License-Identifier: MIT
// weft — the parameter registry behind fi_param_define / fi_param_get / fi_getparams.
#pragma once

#include <rdma/fabric.h>
#include <rdma/providers/fi_prov.h>

#include <string>

namespace weft::core {

// The environment variable that sets a parameter: FI_<PROV>_<NAME>, or
// FI_<NAME> for the core (prov == nullptr or named "core").
std::string param_env_name(const fi_provider* prov, const char* name);

}  // namespace weft::core
