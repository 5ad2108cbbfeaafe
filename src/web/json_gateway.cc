#include "web/json_gateway.h"

#include <future>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>
#include <google/protobuf/util/json_util.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <spdlog/spdlog.h>

#include "dex/api.pb.h"
#include "web/http_status.h"

namespace dex::web {
namespace {

namespace pb = google::protobuf;

// The services the gateway reaches (docs/dex-web.md): never the Worker stream
// (dex.WorkerTaskService) nor the hot-standby service.
constexpr std::string_view kServices[] = {"dex.FlowService", "dex.AdminService"};

GatewayReply failure(grpc::StatusCode code, std::string_view message) {
  return GatewayReply{http_status_for(code), error_body(code, message)};
}

// The unary method `service`/`method` of the allow-list, or null.
const pb::MethodDescriptor* find_method(std::string_view service, std::string_view method) {
  bool allowed = false;
  for (std::string_view s : kServices) allowed |= s == service;
  if (!allowed) return nullptr;
  // A message of api.proto names its file: that links api.proto's descriptors
  // (and those it imports) into the generated pool.
  const pb::DescriptorPool* pool = dex::DescribeRequest::descriptor()->file()->pool();
  const pb::ServiceDescriptor* s = pool->FindServiceByName(std::string(service));
  if (s == nullptr) return nullptr;
  const pb::MethodDescriptor* m = s->FindMethodByName(std::string(method));
  if (m == nullptr || m->client_streaming() || m->server_streaming()) return nullptr;
  return m;
}

bool blank(std::string_view text) {
  return text.find_first_not_of(" \t\r\n") == std::string_view::npos;
}

// The call's deadline: a long poll (its request has timeout_ms) waits for
// its own timeout plus kLongPollSlack, every other call kGatewayDeadline.
std::chrono::milliseconds deadline_for(const pb::Message& request) {
  const pb::FieldDescriptor* field = request.GetDescriptor()->FindFieldByName("timeout_ms");
  if (field == nullptr || field->is_repeated()) return kGatewayDeadline;
  int64_t ms = 0;
  if (field->cpp_type() == pb::FieldDescriptor::CPPTYPE_INT64) {
    ms = request.GetReflection()->GetInt64(request, field);
  } else if (field->cpp_type() == pb::FieldDescriptor::CPPTYPE_INT32) {
    ms = request.GetReflection()->GetInt32(request, field);
  } else {
    return kGatewayDeadline;
  }
  // 0 (or a value the API refuses) waits for the server's answer all the same.
  std::chrono::milliseconds timeout = ms <= 0 ? kLongPollDefault : std::chrono::milliseconds(ms);
  if (timeout > kLongPollMax) timeout = kLongPollMax;
  return timeout + kLongPollSlack;
}

// gRPC metadata values are printable ASCII.
bool metadata_safe(std::string_view value) {
  for (char c : value) {
    if (c < 0x20 || c > 0x7e) return false;
  }
  return true;
}

}  // namespace

JsonGateway::JsonGateway(const std::string& api_address) {
  grpc::ChannelArguments args;
  // An answer may carry values up to values.maxSize.
  args.SetMaxReceiveMessageSize(-1);
  // The API replaces its gRPC server on a role change and a standby closes
  // connections every few seconds: reconnect quickly rather than back off.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  channel_ = grpc::CreateCustomChannel(api_address, grpc::InsecureChannelCredentials(), args);
}

JsonGateway::~JsonGateway() { cancel_all(); }

void JsonGateway::cancel_all() {
  std::lock_guard<std::mutex> lock(mu_);
  stopped_ = true;
  for (grpc::ClientContext* context : open_) context->TryCancel();
}

GatewayReply JsonGateway::call(std::string_view service, std::string_view method,
                               std::string_view body, std::string_view authorization) {
  const pb::MethodDescriptor* m = find_method(service, method);
  if (m == nullptr) {
    return failure(grpc::StatusCode::NOT_FOUND,
                   fmt::format("no method {}/{} in the JSON gateway: it serves dex.FlowService "
                               "and dex.AdminService (docs/dex-web.md)",
                               service, method));
  }
  pb::MessageFactory* factory = pb::MessageFactory::generated_factory();
  std::unique_ptr<pb::Message> request(factory->GetPrototype(m->input_type())->New());
  if (!blank(body)) {
    pb::util::JsonParseOptions options;
    options.ignore_unknown_fields = false;
    auto parsed = pb::util::JsonStringToMessage(pb::StringPiece(body.data(), body.size()),
                                                request.get(), options);
    if (!parsed.ok()) {
      return failure(grpc::StatusCode::INVALID_ARGUMENT,
                     fmt::format("the body is not a {} in JSON: {}", m->input_type()->full_name(),
                                 std::string(parsed.message())));
    }
  }
  if (!metadata_safe(authorization)) {
    return failure(grpc::StatusCode::INVALID_ARGUMENT,
                   "the Authorization header may hold printable ASCII only");
  }
  std::string bytes;
  if (!request->SerializeToString(&bytes)) {
    return failure(grpc::StatusCode::INTERNAL, "the request could not be serialized");
  }

  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + deadline_for(*request));
  if (!authorization.empty()) context.AddMetadata("authorization", std::string(authorization));
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopped_) return failure(grpc::StatusCode::UNAVAILABLE, "dex-web is shutting down");
    open_.insert(&context);
  }
  grpc::Slice slice(bytes);
  grpc::ByteBuffer request_buffer(&slice, 1);
  grpc::ByteBuffer response_buffer;
  std::promise<grpc::Status> done;
  grpc::GenericStub stub(channel_);
  stub.UnaryCall(&context, fmt::format("/{}/{}", service, method), grpc::StubOptions(),
                 &request_buffer, &response_buffer,
                 [&done](grpc::Status status) { done.set_value(std::move(status)); });
  grpc::Status status = done.get_future().get();
  bool stopped = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    open_.erase(&context);
    stopped = stopped_;
  }
  if (!status.ok()) {
    if (stopped && status.error_code() == grpc::StatusCode::CANCELLED) {
      return failure(grpc::StatusCode::UNAVAILABLE, "dex-web is shutting down");
    }
    spdlog::debug("dex-web: {}/{} answered {}", service, method,
                  grpc_code_name(status.error_code()));
    return failure(status.error_code(), status.error_message());
  }

  std::vector<grpc::Slice> slices;
  std::string answer;
  if (!response_buffer.Dump(&slices).ok()) {
    return failure(grpc::StatusCode::INTERNAL, "the API's answer could not be read");
  }
  for (const grpc::Slice& s : slices)
    answer.append(reinterpret_cast<const char*>(s.begin()), s.size());
  std::unique_ptr<pb::Message> response(factory->GetPrototype(m->output_type())->New());
  if (!response->ParseFromString(answer)) {
    return failure(grpc::StatusCode::INTERNAL,
                   fmt::format("the API's answer is not a {}", m->output_type()->full_name()));
  }
  pb::util::JsonPrintOptions print;
  print.always_print_primitive_fields = true;  // every field, defaults included
  print.preserve_proto_field_names = false;    // lowerCamelCase
  GatewayReply reply;
  auto printed = pb::util::MessageToJsonString(*response, &reply.body, print);
  if (!printed.ok()) {
    return failure(grpc::StatusCode::INTERNAL,
                   fmt::format("the API's answer could not be printed as JSON: {}",
                               std::string(printed.message())));
  }
  reply.http_status = 200;
  return reply;
}

}  // namespace dex::web
