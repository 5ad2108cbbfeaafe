// The engine's side of large values (docs/engine.md, "Large values"): what a
// client or a Worker brings in is stored as blobs before the record that
// references it is appended; what goes out (an answer, a task) has its values
// back in place. Internal to src/engine.
#pragma once

#include <string_view>

#include "blob/blob_store.h"
#include "blob/blob_values.h"
#include "common/status.h"
#include "dex/flow_api.pb.h"

namespace dex {

// A copy of `request` whose long values are blobs of `flow_id` (null `blobs`:
// the request as it is). InvalidArgument names a value over the maximum.
template <typename T>
StatusOr<T> values_in(BlobStore* blobs, std::string_view flow_id, const T& request) {
  T copy = request;
  if (blobs == nullptr) return copy;
  if (Status s = offload_values(*blobs, flow_id, copy); !s.is_ok()) return s;
  return copy;
}

// `answer` with its blob values in place, within the message budget.
template <typename T>
StatusOr<T> values_out(BlobStore* blobs, StatusOr<T> answer) {
  if (blobs == nullptr || !answer.is_ok()) return answer;
  if (Status s = inline_values(*blobs, answer.value(), blobs->settings().message_bytes_max);
      !s.is_ok())
    return s;
  return answer;
}

// A history page with its values in place: events past the message budget
// are left for the next page ("more"), at least one event per page.
StatusOr<flow::GetHistoryEventsResponse> history_out(BlobStore* blobs,
                                                     StatusOr<flow::GetHistoryEventsResponse> page);

}  // namespace dex
