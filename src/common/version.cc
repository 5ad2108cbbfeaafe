#include "common/version.h"

#include <fmt/format.h>

#include "dex_version_info.h"  // generated in the build directory (gen/)

namespace dex {

std::string_view project_version() { return DEX_VERSION; }

std::string_view git_revision() { return DEX_GIT_REVISION; }

std::string version_line(std::string_view program) {
  return git_revision().empty()
             ? fmt::format("{} {} (no git revision)", program, project_version())
             : fmt::format("{} {} (git {})", program, project_version(), git_revision());
}

}  // namespace dex
