// What every binary prints for --version: "<program> <version> (git <rev>)",
// from the project version in CMakeLists.txt and the git revision the binary
// was built from ("(no git revision)" outside a git checkout).
#pragma once

#include <string>
#include <string_view>

namespace dex {

std::string_view project_version();  // "0.1.0"
std::string_view git_revision();     // the short commit id; empty when unknown
std::string version_line(std::string_view program);

}  // namespace dex
