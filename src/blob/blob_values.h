// Values in messages, to and from blobs (docs/engine.md, "Large values"). The
// walks find every flow::Payload and flow::AttributeValue in any message by
// reflection, so that a message that gains a value field is covered without
// a change here.
#pragma once

#include <cstdint>
#include <string_view>

#include <google/protobuf/message.h>

#include "blob/blob_store.h"
#include "common/status.h"
#include "dex/flow.pb.h"

namespace dex {

// What a request or a Worker result brings in, before it is recorded: every
// value longer than the threshold moves into a blob of `flow_id` (written
// first) and the message keeps its reference. Refused with InvalidArgument
// naming the field and the limit: a value longer than value_bytes_max, a JSON
// Attribute value that is not one JSON value (common/json_value.h; checked
// here for the values the flow rules then see only as references), and a
// reference the sender set
// (only the server writes them). Other errors are the object store's. On
// error the message may be changed in part: discard it.
Status offload_values(BlobStore& blobs, std::string_view flow_id,
                      google::protobuf::Message& message);

// What goes out (a task, an answer): every blob value back in place. Fails
// with InvalidArgument when the message with its values in place would be
// longer than `bytes_max` (nothing is read then), and with the blob store's
// error (Corruption for a missing or corrupt blob) when a value cannot be read.
Status inline_values(BlobStore& blobs, google::protobuf::Message& message, uint64_t bytes_max);

// Whether `message` holds a blob reference anywhere.
bool has_blob_refs(const google::protobuf::Message& message);

// The length of `message` with its blob values in place (an upper bound by
// a few bytes per reference).
uint64_t inlined_size(const google::protobuf::Message& message);

// Whether the stored value (perhaps a blob reference) equals `target` (an
// inline value), without reading the blob: a reference equals a value of the
// same type, length and SHA-256.
bool same_attribute_value(const flow::AttributeValue& stored, const flow::AttributeValue& target);

}  // namespace dex
