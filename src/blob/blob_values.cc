#include "blob/blob_values.h"

#include <fmt/format.h>

#include <functional>

#include "common/digest.h"
#include "common/json_value.h"

namespace dex {
namespace {

namespace pb = google::protobuf;

// Deeper than any dex message nests (and than protobuf's parse limit of 100).
constexpr int kDepthMax = 100;

std::string size_text(uint64_t bytes) {
  if (bytes >= (1u << 20) && bytes % (1u << 20) == 0) return fmt::format("{} MiB", bytes >> 20);
  if (bytes >= (1u << 10) && bytes % (1u << 10) == 0) return fmt::format("{} KiB", bytes >> 10);
  return fmt::format("{} bytes", bytes);
}

// The content of a string, JSON or bytes value (null for the other types).
std::string* mutable_content(flow::AttributeValue& v) {
  switch (v.value_case()) {
    case flow::AttributeValue::kStringValue:
      return v.mutable_string_value();
    case flow::AttributeValue::kJsonValue:
      return v.mutable_json_value();
    case flow::AttributeValue::kBytesValue:
      return v.mutable_bytes_value();
    default:
      return nullptr;
  }
}

const std::string* content(const flow::AttributeValue& v) {
  switch (v.value_case()) {
    case flow::AttributeValue::kStringValue:
      return &v.string_value();
    case flow::AttributeValue::kJsonValue:
      return &v.json_value();
    case flow::AttributeValue::kBytesValue:
      return &v.bytes_value();
    default:
      return nullptr;
  }
}

// What a walk does at each value; `path` names it ("decision.gracefulComplete").
struct Visitor {
  std::function<Status(flow::Payload&, const std::string& path)> payload;
  std::function<Status(flow::AttributeValue&, const std::string& path)> value;
};

// Every Payload and AttributeValue in `m`, depth first, in field order; stops
// at the first error. Bounded by the message's fields and kDepthMax.
Status walk(pb::Message& m, std::string& path, const Visitor& v, int depth) {
  if (depth > kDepthMax) return Status::invalid_argument(path + ": nested too deep");
  if (auto* p = pb::DynamicCastToGenerated<flow::Payload>(&m)) return v.payload(*p, path);
  if (auto* a = pb::DynamicCastToGenerated<flow::AttributeValue>(&m)) return v.value(*a, path);
  const pb::Reflection* r = m.GetReflection();
  std::vector<const pb::FieldDescriptor*> fields;
  r->ListFields(m, &fields);
  for (const pb::FieldDescriptor* f : fields) {
    if (f->cpp_type() != pb::FieldDescriptor::CPPTYPE_MESSAGE) continue;
    const size_t mark = path.size();
    if (!path.empty()) path += '.';
    path += f->json_name();
    Status s = Status::ok();
    if (f->is_repeated()) {
      const size_t name_end = path.size();
      for (int i = 0; i < r->FieldSize(m, f) && s.is_ok(); ++i) {
        pb::Message* item = r->MutableRepeatedMessage(&m, f, i);
        path += fmt::format("[{}]", i);
        // An Attribute is named by its key: "writes[2] (Attribute 'status')".
        if (auto* attr = pb::DynamicCastToGenerated<flow::Attribute>(item)) {
          path += fmt::format(" (Attribute '{}'{})", attr->key(),
                              attr->instance_key().empty()
                                  ? ""
                                  : fmt::format(", instance '{}'", attr->instance_key()));
        }
        s = walk(*item, path, v, depth + 1);
        path.resize(name_end);
      }
    } else {
      s = walk(*r->MutableMessage(&m, f), path, v, depth + 1);
    }
    path.resize(mark);
    if (!s.is_ok()) return s;
  }
  return Status::ok();
}

Status walk(pb::Message& m, const Visitor& v) {
  std::string path;
  return walk(m, path, v, 0);
}

// The read-only walk: every reference in `m`. Bounded as walk().
void each_ref(const pb::Message& m, const std::function<void(const flow::BlobRef&)>& f,
              int depth = 0) {
  if (depth > kDepthMax) return;
  if (auto* p = pb::DynamicCastToGenerated<flow::Payload>(&m)) {
    if (p->has_blob()) f(p->blob());
    return;
  }
  if (auto* a = pb::DynamicCastToGenerated<flow::AttributeValue>(&m)) {
    if (a->has_blob()) f(a->blob());
    return;
  }
  const pb::Reflection* r = m.GetReflection();
  std::vector<const pb::FieldDescriptor*> fields;
  r->ListFields(m, &fields);
  for (const pb::FieldDescriptor* field : fields) {
    if (field->cpp_type() != pb::FieldDescriptor::CPPTYPE_MESSAGE) continue;
    if (field->is_repeated()) {
      for (int i = 0; i < r->FieldSize(m, field); ++i)
        each_ref(r->GetRepeatedMessage(m, field, i), f, depth + 1);
    } else {
      each_ref(r->GetMessage(m, field), f, depth + 1);
    }
  }
}

Status refuse_ref(const std::string& path) {
  return Status::invalid_argument(
      (path.empty() ? std::string("the value") : path) +
      " carries a blob reference: only the server sets one (send the value itself)");
}

Status check_length(const BlobSettings& s, const std::string& path, uint64_t bytes) {
  if (bytes <= s.value_bytes_max) return Status::ok();
  return Status::invalid_argument(
      fmt::format("{} is {} bytes; the limit is {} bytes ({}, the server's values.maxSize)",
                  path.empty() ? std::string("the value") : path, bytes, s.value_bytes_max,
                  size_text(s.value_bytes_max)));
}

}  // namespace

Status offload_values(BlobStore& blobs, std::string_view flow_id, pb::Message& message) {
  const BlobSettings& s = blobs.settings();
  Visitor v;
  v.payload = [&](flow::Payload& p, const std::string& path) -> Status {
    if (p.has_blob()) return refuse_ref(path);
    if (Status st = check_length(s, path, p.data().size()); !st.is_ok()) return st;
    if (p.data().size() <= s.threshold_bytes) return Status::ok();
    auto ref = blobs.put(flow_id, p.data());
    if (!ref.is_ok()) return ref.status();
    *p.mutable_blob() = std::move(ref).value();
    p.clear_data();
    return Status::ok();
  };
  v.value = [&](flow::AttributeValue& a, const std::string& path) -> Status {
    if (a.has_blob()) return refuse_ref(path);
    std::string* text = mutable_content(a);
    if (text == nullptr) return Status::ok();
    if (Status st = check_length(s, path, text->size()); !st.is_ok()) return st;
    if (text->size() <= s.threshold_bytes) return Status::ok();
    // The flow rules check a JSON value only when it is inline.
    if (a.has_json_value()) {
      if (Status st = check_json_value(*text); !st.is_ok()) {
        return Status::invalid_argument(path + ": the value is " + st.message());
      }
    }
    auto ref = blobs.put(flow_id, *text);
    if (!ref.is_ok()) return ref.status();
    *a.mutable_blob() = std::move(ref).value();
    text->clear();  // the oneof keeps naming the type
    return Status::ok();
  };
  return walk(message, v);
}

Status inline_values(BlobStore& blobs, pb::Message& message, uint64_t bytes_max) {
  if (!has_blob_refs(message)) return Status::ok();
  if (const uint64_t total = inlined_size(message); total > bytes_max) {
    return Status::invalid_argument(fmt::format(
        "with its values in place the message would be {} bytes, over the limit of {} bytes for "
        "one message: ask for less at once",
        total, bytes_max));
  }
  Visitor v;
  v.payload = [&](flow::Payload& p, const std::string&) -> Status {
    if (!p.has_blob()) return Status::ok();
    auto value = blobs.get(p.blob());
    if (!value.is_ok()) return value.status();
    p.set_data(**value);
    p.clear_blob();
    return Status::ok();
  };
  v.value = [&](flow::AttributeValue& a, const std::string& path) -> Status {
    if (!a.has_blob()) return Status::ok();
    std::string* text = mutable_content(a);
    if (text == nullptr) {
      return Status::corruption(
          fmt::format("{}: blob {} stands for a value that is not a string, JSON or bytes", path,
                      a.blob().key()));
    }
    auto value = blobs.get(a.blob());
    if (!value.is_ok()) return value.status();
    *text = **value;
    a.clear_blob();
    return Status::ok();
  };
  return walk(message, v);
}

bool has_blob_refs(const pb::Message& message) {
  bool found = false;
  each_ref(message, [&](const flow::BlobRef&) { found = true; });
  return found;
}

uint64_t inlined_size(const pb::Message& message) {
  uint64_t total = message.ByteSizeLong();
  each_ref(message, [&](const flow::BlobRef& ref) { total += ref.size_bytes(); });
  return total;
}

bool same_attribute_value(const flow::AttributeValue& stored, const flow::AttributeValue& target) {
  if (!stored.has_blob()) return stored.SerializeAsString() == target.SerializeAsString();
  if (stored.value_case() != target.value_case() || target.has_blob()) return false;
  const std::string* text = content(target);
  return text != nullptr && text->size() == stored.blob().size_bytes() &&
         sha256_hex(*text) == stored.blob().sha256();
}

}  // namespace dex
