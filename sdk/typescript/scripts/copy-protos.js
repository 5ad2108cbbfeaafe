// Copies the gRPC API definition from the repository's proto/ (its single
// source) into dist/proto, so that a built package loads it without the
// repository around it.
"use strict";
const fs = require("node:fs");
const path = require("node:path");

const from = path.resolve(__dirname, "..", "..", "..", "proto", "dex");
const to = path.resolve(__dirname, "..", "dist", "proto", "dex");
fs.mkdirSync(to, { recursive: true });
for (const name of fs.readdirSync(from)) {
  if (name.endsWith(".proto")) fs.copyFileSync(path.join(from, name), path.join(to, name));
}
