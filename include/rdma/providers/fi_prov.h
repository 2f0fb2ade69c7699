/* SPDX-License-Identifier: MIT */
/* weft — provider entry points: struct fi_provider, parameters, FI_EXT_INI */

#ifndef WEFT_RDMA_PROVIDERS_FI_PROV_H
#define WEFT_RDMA_PROVIDERS_FI_PROV_H

#include <rdma/fabric.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * What a provider hands the core. Everything else the core reaches
 * through the ops tables of the objects the provider creates.
 */
struct fi_provider {
	uint32_t		version;	/* provider's own version */
	uint32_t		fi_version;	/* newest API it implements */
	struct fi_context	context;	/* owned by the core */
	const char		*name;
	int	(*getinfo)(uint32_t version, const char *node,
			   const char *service, uint64_t flags,
			   const struct fi_info *hints,
			   struct fi_info **info);
	int	(*fabric)(struct fi_fabric_attr *attr,
			  struct fid_fabric **fabric, void *context);
	void	(*cleanup)(void);
};

/*
 * Dynamically loaded providers are shared objects named lib<name>-fi.so
 * and export one entry point, declared with FI_EXT_INI:
 *
 *	FI_EXT_INI
 *	{
 *		return &my_provider;
 *	}
 */
#define FI_LIB_EXTENSION	"fi"
#define FI_LIB_SUFFIX		FI_LIB_EXTENSION ".so"

#if defined(__GNUC__)
#define WEFT_PROV_EXPORT_ __attribute__((visibility("default")))
#else
#define WEFT_PROV_EXPORT_
#endif

#ifdef __cplusplus
#define FI_EXT_INI \
	extern "C" WEFT_PROV_EXPORT_ struct fi_provider *fi_prov_ini(void)
#else
#define FI_EXT_INI \
	WEFT_PROV_EXPORT_ struct fi_provider *fi_prov_ini(void)
#endif

/*
 * Register a parameter, read from the environment as FI_<PROV>_<NAME>
 * (upper case; the core prefix alone for the core provider). Name and
 * help text are copied.
 */
int fi_param_define(const struct fi_provider *provider, const char *param_name,
		    enum fi_param_type type, const char *help_string_fmt, ...)
#if defined(__GNUC__)
	__attribute__((format(printf, 4, 5)))
#endif
	;

/*
 * Read a defined parameter. Returns 0 and sets *value if the user set it,
 * -FI_ENODATA if unset, -FI_ENOENT if never defined, -FI_EINVAL if the
 * text does not parse as the defined type. *value is untouched on error.
 * value points to char * (STRING), int (INT, BOOL) or size_t (SIZE_T).
 */
int fi_param_get(struct fi_provider *provider, const char *param_name,
		 void *value);

static inline int fi_param_get_str(struct fi_provider *provider,
				   const char *param_name, char **value)
{
	return fi_param_get(provider, param_name, value);
}

static inline int fi_param_get_int(struct fi_provider *provider,
				   const char *param_name, int *value)
{
	return fi_param_get(provider, param_name, value);
}

static inline int fi_param_get_bool(struct fi_provider *provider,
				    const char *param_name, int *value)
{
	return fi_param_get(provider, param_name, value);
}

static inline int fi_param_get_size_t(struct fi_provider *provider,
				      const char *param_name, size_t *value)
{
	return fi_param_get(provider, param_name, value);
}

#ifdef __cplusplus
}
#endif

#endif /* WEFT_RDMA_PROVIDERS_FI_PROV_H */
