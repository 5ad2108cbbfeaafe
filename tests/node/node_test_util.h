// Helpers for driving NodeMachine in tests: a clock of its own and readable
// lists of the commands each input produced.
#pragma once

#include <string>
#include <vector>

#include "node/node_machine.h"

namespace dex {

inline std::vector<NodeCommandKind> kinds(const NodeActions& a) {
  std::vector<NodeCommandKind> out;
  for (const NodeCommand& c : a.commands) out.push_back(c.kind);
  return out;
}

inline bool has(const NodeActions& a, NodeCommandKind kind) {
  for (const NodeCommand& c : a.commands) {
    if (c.kind == kind) return true;
  }
  return false;
}

inline const NodeCommand* find(const NodeActions& a, NodeCommandKind kind) {
  for (const NodeCommand& c : a.commands) {
    if (c.kind == kind) return &c;
  }
  return nullptr;
}

inline std::string describe(const NodeActions& a) {
  std::string s;
  for (const NodeCommand& c : a.commands) {
    if (!s.empty()) s += ", ";
    s += node_command_name(c.kind);
  }
  return "[" + s + "]";
}

}  // namespace dex
