// `dex-server-zd serve --check`: what startup would refuse, found without
// starting anything or contacting the object store.
#pragma once

#include "config/config.h"

namespace dex {

// Every refusal of `serve` startup that needs no network and changes nothing:
// the S3 bucket name, region, prefix and endpoint form, the S3 credentials
// present (open_object_store, which sends no request to S3), and
// objectStore.path / localStore.path not being files. The message names the
// key. Also reaches every Attribute Store as startup does (connect, ping,
// describe the table), the one check that talks to a server.
Status check_serve_config(const NodeSettings& settings);

}  // namespace dex
