// SPDX-License-Identifier: MIT
// weft — unit-test helper: what the library logs while in scope, up to a
// chosen level, read back from a file standing in for stderr.
#pragma once

#include "core/log.hpp"

#include <cstdio>
#include <string>
#include <vector>

#include <unistd.h>

namespace weft::test {

class log_capture {
 public:
  explicit log_capture(fi_log_level level = FI_LOG_INFO)
      : level_(core::log_level_max), file_(std::tmpfile()) {
    std::fflush(stderr);
    saved_ = ::dup(2);
    if (file_ && saved_ >= 0) ::dup2(fileno(file_), 2);
    core::log_level_max = level;
  }
  ~log_capture() {
    core::log_level_max = level_;
    std::fflush(stderr);
    if (saved_ >= 0) ::dup2(saved_, 2), ::close(saved_);
    if (file_) std::fclose(file_);
  }
  log_capture(const log_capture&) = delete;
  log_capture& operator=(const log_capture&) = delete;

  std::string text() {
    std::fflush(stderr);
    std::string s;
    if (!file_) return s;
    char buf[4096];
    ssize_t n;
    off_t off = 0;
    while ((n = ::pread(fileno(file_), buf, sizeof buf, off)) > 0) s.append(buf, n), off += n;
    return s;
  }
  // The lines that contain `needle`.
  std::vector<std::string> lines_with(const std::string& needle) {
    std::vector<std::string> out;
    std::string all = text();
    size_t pos = 0;
    while (pos < all.size()) {
      size_t nl = all.find('\n', pos);
      std::string line = all.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
      if (line.find(needle) != std::string::npos) out.push_back(line);
      if (nl == std::string::npos) break;
      pos = nl + 1;
    }
    return out;
  }

 private:
  int level_;
  std::FILE* file_;
  int saved_ = -1;
};

}  // namespace weft::test
