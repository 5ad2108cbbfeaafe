// The fenced log's public face (docs/log.md): include this one header.
//
// How a server uses it after the lease keeper acquired the lease:
//
//   LogWriter writer(store, clock,
//                    {.node_id = node_id, .process_id = process_id, .epoch = keeper.epoch()},
//                    /*lease_valid=*/[&] { return keeper.is_valid(); },
//                    /*on_fatal=*/[&](const Status& why) { /* refuse work, exit 1 */ });
//   if (Status s = writer.open(); !s.is_ok()) exit(1);        // EpochStart: fences the old holder
//   LogReader replay(store, node_id, snapshot_end_or_first);    // replay up to the EpochStart
//   replay.read_to_end(apply);
//   auto slot = writer.append(record).get();                  // durable and acknowledged
//   collect_garbage(store, writer, snapshot_slot);             // after a snapshot covers it
//   writer.close();                                            // graceful: flushes the queue
//   keeper.release();
#pragma once

#include "log/log_format.h"  // IWYU pragma: export
#include "log/log_gc.h"      // IWYU pragma: export
#include "log/log_reader.h"  // IWYU pragma: export
#include "log/log_writer.h"  // IWYU pragma: export
