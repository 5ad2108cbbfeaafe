#include "metrics/flow_labels.h"

namespace dex {

std::string_view attempt_outcome_label(flow::AttemptOutcome outcome) {
  switch (outcome) {
    case flow::ATTEMPT_COMPLETED:
      return "completed";
    case flow::ATTEMPT_FAILED:
      return "failed";
    case flow::ATTEMPT_TIMED_OUT:
      return "timed_out";
    case flow::ATTEMPT_NOT_COMPLETED:
      return "not_completed";
    default:
      return "unspecified";
  }
}

std::string_view flow_status_label(flow::FlowStatus status) {
  switch (status) {
    case flow::FLOW_COMPLETED:
      return "completed";
    case flow::FLOW_FAILED:
      return "failed";
    case flow::FLOW_CANCELED:
      return "canceled";
    case flow::FLOW_TERMINATED:
      return "terminated";
    case flow::FLOW_TIMED_OUT:
      return "timed_out";
    case flow::FLOW_CONTINUED_AS_NEW:
      return "continued_as_new";
    case flow::FLOW_RUNNING:
      return "running";
    default:
      return "unspecified";
  }
}

std::string_view attempt_kind_label(flow::Method method) {
  switch (method) {
    case flow::WAIT_FOR:
      return "wait_for";
    case flow::EXECUTE:
      return "execute";
    case flow::ON_TIMEOUT:
      return "timeout_handler";
    default:
      return "";
  }
}

}  // namespace dex
