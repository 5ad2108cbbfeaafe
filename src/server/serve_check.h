// `dex-server-zd serve --check`: what startup would refuse, found without
// starting anything or contacting the object store.
#pragma once

#include "config/config.h"
#include "objstore/s3_store.h"

namespace dex {

// The S3 options of objectStore.type s3, with the credentials loaded from
// objectStore.credentials.file/profile or the AWS_* environment. Serve opens
// its store with these; --check validates them with S3ObjectStore::open, which
// makes no request.
StatusOr<S3Options> serve_s3_options(const ServeConfig::ObjectStore& object_store);

// Every refusal of `serve` startup that needs no network and changes nothing:
// the S3 bucket name, region, prefix and endpoint form, the S3 credentials
// present, and objectStore.path / localStore.path not being files. The message
// names the key.
Status check_serve_config(const ServeConfig& config);

}  // namespace dex
