#include "recorder/fleet/index_shipped_pg.h"

#include "recorder/record/record_kind.h"
#include "store/record_file.h"

namespace flightrec::fleet {

namespace {

// The rows of one shipped record, read from its local file.
StatusOr<IndexItem> ItemFor(const ShippedRecord& shipped) {
  ASSIGN_OR_RETURN(auto reader, store::RecordReader::Open(shipped.record_path));
  const store::RecordHeader& h = reader->header();
  if (h.id != shipped.record_id) {
    return InvalidArgument("record file " + shipped.record_path + " holds record " +
                           BoundedText(h.id, 64) + ", not " + shipped.record_id);
  }
  IndexItem item;
  IndexRecord& rec = item.record;
  rec.host_id = shipped.host_id;
  rec.record_id = shipped.record_id;
  rec.kind = BoundedText(h.kind, 32);
  rec.time_ns = h.created_ns;
  rec.object_key = shipped.object_key;
  rec.sha256 = shipped.sha256;
  rec.bytes = shipped.bytes;
  if (recorder::ParseRecordKind(h.kind) == recorder::RecordKind::kCrash) {
    ASSIGN_OR_RETURN(IndexCrash crash, CrashFromRecord(*reader));
    item.crash = std::move(crash);
  }
  return item;
}

}  // namespace

StatusOr<bool> IndexShippedRecord(FleetIndex& index, const ShippedRecord& shipped) {
  ASSIGN_OR_RETURN(IndexItem item, ItemFor(shipped));
  return index.AddRecord(item.record, item.crash ? &*item.crash : nullptr);
}

StatusOr<std::vector<bool>> IndexShippedRecords(FleetIndex& index,
                                                const std::vector<ShippedRecord>& shipped) {
  std::vector<IndexItem> items;
  for (const auto& s : shipped) {
    auto item = ItemFor(s);
    if (!item.ok()) return item.status().Annotate("record " + s.record_id);
    items.push_back(std::move(*item));
  }
  return index.AddRecords(items);
}

}  // namespace flightrec::fleet
