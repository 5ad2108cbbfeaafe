#include "sdk/client.h"

#include <grpcpp/grpcpp.h>

#include <chrono>

#include "dex/api.grpc.pb.h"
#include "sdk/grpc_status.h"

namespace dex {

struct Client::Stubs {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<FlowService::Stub> flows;
  std::unique_ptr<AdminService::Stub> admin;
};

Client::Client(ClientOptions options) : options_(std::move(options)), stubs_(new Stubs) {
  stubs_->channel =
      sdk_internal::make_channel(options_.server_address, milliseconds(100), seconds(1));
  stubs_->flows = FlowService::NewStub(stubs_->channel);
  stubs_->admin = AdminService::NewStub(stubs_->channel);
}

Client::~Client() = default;

namespace {

void set_deadline(grpc::ClientContext& context, Duration timeout) {
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::duration_cast<std::chrono::system_clock::duration>(timeout));
}

// One unary call with the client's deadline and error mapping.
template <typename Response, typename Call>
StatusOr<Response> unary(const ClientOptions& options, Duration timeout, Call&& call,
                         const std::string& credential = "") {
  grpc::ClientContext context;
  set_deadline(context, timeout);
  if (!credential.empty()) context.AddMetadata("authorization", "Bearer " + credential);
  Response response;
  grpc::Status status = call(&context, &response);
  if (!status.ok()) {
    return sdk_internal::status_from_grpc(status, options.server_address, timeout);
  }
  return response;
}

}  // namespace

StatusOr<RegisterFlowTypeResponse> Client::register_flow_type(const std::string& definition) {
  RegisterFlowTypeRequest request;
  request.set_definition(definition);
  return unary<RegisterFlowTypeResponse>(options_, options_.timeout,
                                         [&](grpc::ClientContext* c, RegisterFlowTypeResponse* r) {
                                           return stubs_->flows->RegisterFlowType(c, request, r);
                                         });
}

StatusOr<FlowType> Client::get_flow_type(const std::string& name) {
  GetFlowTypeRequest request;
  request.set_name(name);
  return unary<FlowType>(options_, options_.timeout, [&](grpc::ClientContext* c, FlowType* r) {
    return stubs_->flows->GetFlowType(c, request, r);
  });
}

StatusOr<ListFlowTypesResponse> Client::list_flow_types() {
  ListFlowTypesRequest request;
  return unary<ListFlowTypesResponse>(options_, options_.timeout,
                                      [&](grpc::ClientContext* c, ListFlowTypesResponse* r) {
                                        return stubs_->flows->ListFlowTypes(c, request, r);
                                      });
}

StatusOr<StartFlowResponse> Client::start_flow(const std::string& flow_type,
                                               const std::string& input_json,
                                               const std::string& flow_id) {
  StartFlowRequest request;
  request.set_flow_type(flow_type);
  request.set_input(input_json);
  request.set_flow_id(flow_id);
  return unary<StartFlowResponse>(options_, options_.timeout,
                                  [&](grpc::ClientContext* c, StartFlowResponse* r) {
                                    return stubs_->flows->StartFlow(c, request, r);
                                  });
}

StatusOr<Flow> Client::get_flow(const std::string& flow_id) {
  GetFlowRequest request;
  request.set_flow_id(flow_id);
  return unary<Flow>(options_, options_.timeout, [&](grpc::ClientContext* c, Flow* r) {
    return stubs_->flows->GetFlow(c, request, r);
  });
}

StatusOr<ListFlowsResponse> Client::list_flows(FlowStatus status, uint32_t page_size,
                                               const std::string& page_token) {
  ListFlowsRequest request;
  request.set_status(status);
  request.set_page_size(page_size);
  request.set_page_token(page_token);
  return unary<ListFlowsResponse>(options_, options_.timeout,
                                  [&](grpc::ClientContext* c, ListFlowsResponse* r) {
                                    return stubs_->flows->ListFlows(c, request, r);
                                  });
}

StatusOr<CancelFlowResponse> Client::cancel_flow(const std::string& flow_id) {
  CancelFlowRequest request;
  request.set_flow_id(flow_id);
  return unary<CancelFlowResponse>(options_, options_.timeout,
                                   [&](grpc::ClientContext* c, CancelFlowResponse* r) {
                                     return stubs_->flows->CancelFlow(c, request, r);
                                   });
}

StatusOr<WaitFlowResponse> Client::wait_flow(const std::string& flow_id, Duration wait_timeout) {
  WaitFlowRequest request;
  request.set_flow_id(flow_id);
  request.set_timeout_ms(to_ms(wait_timeout));
  // The server answers ended = false when wait_timeout passes; the call's own
  // deadline leaves it the usual time to do so.
  return unary<WaitFlowResponse>(options_, wait_timeout + options_.timeout,
                                 [&](grpc::ClientContext* c, WaitFlowResponse* r) {
                                   return stubs_->flows->WaitFlow(c, request, r);
                                 });
}

StatusOr<DescribeResponse> Client::describe() {
  DescribeRequest request;
  return unary<DescribeResponse>(
      options_, options_.timeout,
      [&](grpc::ClientContext* c, DescribeResponse* r) {
        return stubs_->admin->Describe(c, request, r);
      },
      options_.admin_credential);
}

}  // namespace dex
