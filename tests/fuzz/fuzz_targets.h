// The fuzz targets, one per decoder of untrusted bytes (README.md here). Each
// takes one input and returns 0; a broken invariant aborts.
#pragma once

#include <cstddef>
#include <cstdint>

namespace dex::fuzz {

int log_batch(const uint8_t* data, size_t size);          // decode_batch, parse_slot_key
int log_reader(const uint8_t* data, size_t size);         // LogReader, find_log_bounds
int lease_record(const uint8_t* data, size_t size);       // decode_lease_record
int snapshot_manifest(const uint8_t* data, size_t size);  // decode_snapshot_manifest
int config(const uint8_t* data, size_t size);             // the YAML config loaders
int s3_xml(const uint8_t* data, size_t size);             // S3 XML, error classification
int flow_rules(const uint8_t* data, size_t size);         // apply_record over any records
int search_query(const uint8_t* data, size_t size);       // parse_query, to_text, search_flows
int sync_machine(const uint8_t* data, size_t size);       // the Attribute Store's SyncMachine

}  // namespace dex::fuzz
