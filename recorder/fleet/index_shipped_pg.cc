#include "recorder/fleet/index_shipped_pg.h"

#include "store/record_file.h"

namespace flightrec::fleet {

StatusOr<bool> IndexShippedRecord(FleetIndex& index, const ShippedRecord& shipped) {
  ASSIGN_OR_RETURN(auto reader, store::RecordReader::Open(shipped.record_path));
  const store::RecordHeader& h = reader->header();
  if (h.id != shipped.record_id) {
    return InvalidArgument("record file " + shipped.record_path + " holds record " +
                           BoundedText(h.id, 64) + ", not " + shipped.record_id);
  }
  IndexRecord rec;
  rec.host_id = shipped.host_id;
  rec.record_id = shipped.record_id;
  rec.kind = BoundedText(h.kind, 32);
  rec.time_ns = h.created_ns;
  rec.object_key = shipped.object_key;
  rec.sha256 = shipped.sha256;
  rec.bytes = shipped.bytes;
  if (h.kind != "crash") return index.AddRecord(rec);
  ASSIGN_OR_RETURN(IndexCrash crash, CrashFromRecord(*reader));
  return index.AddRecord(rec, &crash);
}

}  // namespace flightrec::fleet
