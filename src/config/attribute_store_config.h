// attributeStore.* of a settings file (docs/configuration.md, "attributeStore"):
// read by config.cc's reader, in a file of its own because each store is a
// mapping under a name the user chooses. Private to src/config.
#pragma once

#include <string>
#include <string_view>

#include <yaml-cpp/yaml.h>

#include "attrstore/store_settings.h"
#include "common/status.h"

namespace dex {

// Reads `section` (the attributeStore mapping) into `out`, all or nothing.
// Every error names `source` and the key; none shows a DSN.
Status read_attribute_store_settings(const YAML::Node& section, std::string_view source,
                                     attrstore::AttributeStoreSettings& out);

// The attributeStore section as `serve --check` prints it: names, types,
// tables and where each DSN comes from, never the DSN itself.
std::string describe_attribute_store_settings(const attrstore::AttributeStoreSettings& settings);

}  // namespace dex
