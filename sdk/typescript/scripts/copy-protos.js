// The gRPC API definition (dex/*.proto) travels inside the package, in its own
// proto/ folder: the runtime loads it from there (src/proto.ts) and `npm pack`
// ships it. In the repository the build refreshes that copy from the
// repository's proto/ (the single source of the API); in a copy of the
// package outside the repository (a copied folder, an unpacked tarball) the
// package's own copy is used as it is. Fails, saying so, when neither is
// there or a file that another imports is missing.
"use strict";
const fs = require("node:fs");
const path = require("node:path");

const pkg = path.resolve(__dirname, "..");
const repository = path.resolve(pkg, "..", "..", "proto", "dex");
const own = path.join(pkg, "proto", "dex");
const hasApi = (dir) => fs.existsSync(path.join(dir, "api.proto"));
const protos = (dir) => fs.readdirSync(dir).filter((name) => name.endsWith(".proto")).sort();

function fail(message) {
  console.error(`copy-protos: ${message}`);
  process.exit(1);
}

let source;
if (hasApi(repository)) {
  source = repository;
  // A fresh copy: a file removed from the repository goes from the package too.
  fs.mkdirSync(own, { recursive: true });
  for (const name of protos(own)) fs.rmSync(path.join(own, name));
  for (const name of protos(repository)) fs.copyFileSync(path.join(repository, name), path.join(own, name));
} else if (hasApi(own)) {
  source = own;
} else {
  fail(
    `the API definition (dex/api.proto) is neither in the repository (${repository}) nor in the package ` +
      `(${own}); build the package inside the dex repository once (npm run build or npm pack), ` +
      "or copy the repository's proto/dex/*.proto into proto/dex/ of the package",
  );
}

// Every import of a copied file must be there too ("dex/x.proto", relative to proto/).
const names = new Set(protos(own));
for (const name of names) {
  const text = fs.readFileSync(path.join(own, name), "utf8");
  for (const match of text.matchAll(/^\s*import\s+(?:public\s+|weak\s+)?"dex\/([^"]+)"\s*;/gm)) {
    if (!names.has(match[1])) fail(`${path.join(own, name)} imports dex/${match[1]}, which ${source} does not have`);
  }
}

// Builds before the copy moved to proto/ put one in dist/proto; the runtime no
// longer reads it, and `npm pack` should not ship it.
fs.rmSync(path.join(pkg, "dist", "proto"), { recursive: true, force: true });
