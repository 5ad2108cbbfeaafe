// Records' times rise in log order (src/flow/record_time.h).
#include "flow/record_time.h"

#include <gtest/gtest.h>

namespace dex {
namespace {

TEST(RecordTime, AnEarlierStampIsRaisedToTheLastRecords) {
  flow::FlowRecord r;
  r.mutable_method_result()->set_at_unix_ms(1'000);
  r.set_at_unix_ms(1'000);
  EXPECT_EQ(stamp_no_earlier(r, 1'005), 1'005);
  EXPECT_EQ(r.method_result().at_unix_ms(), 1'005);
  EXPECT_EQ(r.at_unix_ms(), 1'005);
}

TEST(RecordTime, ALaterStampIsKeptAndBecomesTheFloor) {
  flow::FlowRecord r;
  r.mutable_timer_fired()->set_at_unix_ms(2'000);
  EXPECT_EQ(stamp_no_earlier(r, 1'005), 2'000);
  EXPECT_EQ(r.timer_fired().at_unix_ms(), 2'000);
  EXPECT_EQ(r.at_unix_ms(), 0) << "no assignments time was set, none is added";
}

TEST(RecordTime, EveryKindsTimeIsRaised) {
  using R = flow::FlowRecord;
  std::vector<std::function<int64_t(R&)>> kinds = {
      [](R& r) {
        r.mutable_declare_flows();
        return r.declare_flows().at_unix_ms();
      },
      [](R& r) {
        r.mutable_start_flow();
        return r.start_flow().at_unix_ms();
      },
      [](R& r) {
        r.mutable_method_result();
        return r.method_result().at_unix_ms();
      },
      [](R& r) {
        r.mutable_attempt_withdrawn();
        return r.attempt_withdrawn().at_unix_ms();
      },
      [](R& r) {
        r.mutable_timer_fired();
        return r.timer_fired().at_unix_ms();
      },
      [](R& r) {
        r.mutable_publish();
        return r.publish().at_unix_ms();
      },
      [](R& r) {
        r.mutable_stop_flow();
        return r.stop_flow().at_unix_ms();
      },
      [](R& r) {
        r.mutable_skip_timer();
        return r.skip_timer().at_unix_ms();
      },
      [](R& r) {
        r.mutable_set_attributes();
        return r.set_attributes().at_unix_ms();
      },
      [](R& r) {
        r.mutable_invoke_rpc();
        return r.invoke_rpc().at_unix_ms();
      },
  };
  for (size_t i = 0; i < kinds.size(); ++i) {
    R r;
    kinds[i](r);  // sets the kind, time 0
    EXPECT_EQ(stamp_no_earlier(r, 7'000), 7'000) << "kind " << i;
    EXPECT_EQ(kinds[i](r), 7'000) << "kind " << i;
  }
}

TEST(RecordTime, AssignmentsOnlyCarryTheRecordsTime) {
  flow::FlowRecord r;
  r.add_assignments();
  r.set_at_unix_ms(500);
  EXPECT_EQ(stamp_no_earlier(r, 900), 900);
  EXPECT_EQ(r.at_unix_ms(), 900);
}

TEST(RecordTime, ARecordsTimeIsTheGreatestItCarries) {
  flow::FlowRecord r;
  EXPECT_EQ(record_time(r), 0) << "no kind, no assignments";
  r.mutable_publish()->set_at_unix_ms(1'200);
  EXPECT_EQ(record_time(r), 1'200);
  r.set_at_unix_ms(1'300);
  EXPECT_EQ(record_time(r), 1'300) << "its assignments' time";
  r.mutable_publish()->set_at_unix_ms(1'400);
  EXPECT_EQ(record_time(r), 1'400);
  EXPECT_EQ(stamp_no_earlier(r, 0), record_time(r)) << "stamping at 0 changes nothing";
}

}  // namespace
}  // namespace dex
