#include "attrstore/sql_table.h"

#include "attrstore/table_check.h"

namespace dex::attrstore {
namespace {

size_t utf8_chars(std::string_view s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

Status check_identity(const StoreSettings& store, std::string_view node_id) {
  if (store.name.empty()) return Status::invalid_argument("Attribute Store with an empty name");
  if (utf8_chars(store.name) > kWatermarkKeyCharsMax) {
    return Status::invalid_argument(store_prefix(store.name) +
                                    "the store name is longer than 128 characters");
  }
  if (node_id.empty() || utf8_chars(node_id) > kWatermarkKeyCharsMax) {
    return Status::invalid_argument(store_prefix(store.name) +
                                    "the node ID must have 1 to 128 characters");
  }
  return Status::ok();
}

StatusOr<std::unique_ptr<SqlSession>> make_session(const StoreSettings& store,
                                                   Duration connect_timeout) {
  return store.type == StoreType::kPostgres ? make_postgres_session(store.dsn, connect_timeout)
                                            : make_mysql_session(store.dsn, connect_timeout);
}

// Describes and checks the target table. Messages without the store prefix.
StatusOr<std::pair<DescribedTable, TableSchema>> describe_target_table(SqlSession& session,
                                                                       const TableName& name,
                                                                       TimePoint deadline) {
  auto described = session.describe(name, deadline);
  if (!described.is_ok()) {
    if (described.status().is_not_found()) {
      return Status::permanent("table " + name.display() +
                               " does not exist (names are case-sensitive)");
    }
    return described.status();
  }
  auto schema = check_target_table(*described);
  if (!schema.is_ok()) return schema.status();
  return std::pair{std::move(described).value(), std::move(schema).value()};
}

// Creates (if asked and absent: CREATE needs a privilege that writing rows
// does not) and checks the watermark table beside the target.
Status prepare_watermark_table(SqlSession& session, const std::string& schema, bool create,
                               TimePoint deadline) {
  const TableName name{schema, std::string(kWatermarkTable)};
  auto described = session.describe(name, deadline);
  if (!described.is_ok() && described.status().is_not_found() && create) {
    if (Status s = session.create_watermark_table(schema, deadline); !s.is_ok()) return s;
    described = session.describe(name, deadline);
  }
  if (!described.is_ok()) {
    if (described.status().is_not_found()) {
      return Status::permanent("watermark table " + name.display() +
                               " does not exist; create it (docs/attribute-store-types.md) or set "
                               "attributeStore.createWatermarkTable");
    }
    return described.status();
  }
  return check_watermark_table(*described);
}

}  // namespace

std::string store_prefix(std::string_view store_name) {
  return "Attribute Store \"" + std::string(store_name) + "\": ";
}

const Column* TableSchema::find(std::string_view name) const {
  for (const Column& c : columns) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

AttributeTable::~AttributeTable() = default;

StatusOr<std::unique_ptr<AttributeTable>> AttributeTable::open(const StoreSettings& store,
                                                               const AttributeStoreSettings& common,
                                                               std::string_view node_id,
                                                               Duration connect_timeout) {
  if (Status s = check_identity(store, node_id); !s.is_ok()) return s;
  const std::string prefix = store_prefix(store.name);
  auto fail = [&](const Status& s) { return Status(s.code(), prefix + s.message()); };
  auto name = parse_table_name(store.table_name, store.type);
  if (!name.is_ok()) return fail(name.status());
  auto session = make_session(store, connect_timeout);
  if (!session.is_ok()) return fail(session.status());
  SqlSession& sql = **session;
  const TimePoint deadline = SystemClock::instance().now() + connect_timeout;
  if (Status s = sql.connect(deadline); !s.is_ok()) return fail(s);
  if (Status s = sql.ping(deadline); !s.is_ok()) return fail(s);
  auto target = describe_target_table(sql, *name, deadline);
  if (!target.is_ok()) return fail(target.status());
  auto& [described, schema] = *target;
  if (Status s =
          prepare_watermark_table(sql, described.schema, common.create_watermark_table, deadline);
      !s.is_ok()) {
    return fail(s);
  }
  const TableName resolved{described.schema, described.table};
  const TableName watermark{described.schema, std::string(kWatermarkTable)};
  auto table = std::make_unique<SqlAttributeTable>(
      store, WatermarkKey{std::string(node_id), store.name}, resolved, watermark, std::move(schema),
      std::move(session).value(), connect_timeout);
  return std::unique_ptr<AttributeTable>(std::move(table));
}

SqlAttributeTable::SqlAttributeTable(StoreSettings store, WatermarkKey key, TableName target,
                                     TableName watermark, TableSchema schema,
                                     std::unique_ptr<SqlSession> session, Duration op_timeout)
    : store_(std::move(store)),
      key_(std::move(key)),
      target_(std::move(target)),
      watermark_(std::move(watermark)),
      op_timeout_(op_timeout),
      schema_(std::move(schema)),
      session_(std::move(session)) {
  session_->set_target(target_, watermark_, known_names());
}

std::vector<std::string> SqlAttributeTable::known_names() const {
  std::vector<std::string> names = {target_.schema, target_.table, std::string(kWatermarkTable),
                                    "node_id",      "store",       "epoch",
                                    "last_slot",    "process",     "updated_at"};
  for (const Column& c : schema_.columns) names.push_back(c.name);
  return names;
}

const TableSchema& SqlAttributeTable::schema() const { return schema_; }

TimePoint SqlAttributeTable::op_deadline() const {
  return SystemClock::instance().now() + op_timeout_;
}

Status SqlAttributeTable::annotate(const Status& status, std::string_view what) const {
  if (status.is_ok()) return status;
  return Status(status.code(), store_prefix(store_.name) + std::string(what) + " " +
                                   describe_target() + ": " + status.message());
}

Status SqlAttributeTable::refresh_schema() {
  std::lock_guard lock(mu_);
  const TimePoint deadline = op_deadline();
  if (Status s = session_->connect(deadline); !s.is_ok()) return annotate(s, "describe");
  auto target = describe_target_table(*session_, target_, deadline);
  if (!target.is_ok()) return annotate(target.status(), "describe");
  schema_ = std::move(target->second);
  session_->set_target(target_, watermark_, known_names());
  return Status::ok();
}

Status SqlAttributeTable::ping() {
  std::lock_guard lock(mu_);
  const TimePoint deadline = op_deadline();
  Status s = session_->connect(deadline);
  if (s.is_ok()) s = session_->ping(deadline);
  return annotate(s, "ping");
}

StatusOr<std::optional<Watermark>> SqlAttributeTable::read_watermark() {
  std::lock_guard lock(mu_);
  const TimePoint deadline = op_deadline();
  if (Status s = session_->connect(deadline); !s.is_ok())
    return annotate(s, "read the watermark of");
  auto read = session_->read_watermark(key_, deadline);
  if (!read.is_ok()) return annotate(read.status(), "read the watermark of");
  return read;
}

std::string SqlAttributeTable::describe_target() const { return target_.display(); }

void SqlAttributeTable::set_test_hooks(TableTestHooks hooks) {
  std::lock_guard lock(mu_);
  hooks_ = std::move(hooks);
}

}  // namespace dex::attrstore
