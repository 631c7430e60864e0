#include "client/file_reader.h"

#include <algorithm>
#include <cstring>

#include "protocol/wire.h"

namespace cairn::client {
namespace {

// Fetches a whole page into a buffer slot and publishes the result to its waiters.
Status FillSlot(const ObjectRef& object, const ReadContext& ctx, uint64_t page, const Hash128& id,
                PageBuffer::Slot* slot) {
  std::span<char> data =
      slot->Allocate(protocol::PageLength(object.info.size, page, ctx.fetcher->page_size()));
  Status s = ctx.fetcher->ReadRange(object, page, 0, data);
  if (!s.ok()) ctx.buffer->Erase(id);
  slot->Finish(s);
  return s;
}

}  // namespace

Hash128 FileReaderImpl::PageId(uint64_t page) const {
  std::string key = object_.object_id;
  key += '\0';
  key += object_.info.version;
  key += '\0';
  key += std::to_string(page);
  return Hash128Of(key);
}

uint64_t FileReaderImpl::PageCount() const {
  uint32_t ps = ctx_.fetcher->page_size();
  return (object_.info.size + ps - 1) / ps;
}

uint32_t FileReaderImpl::UpdateStreak(uint64_t offset, size_t n) {
  MutexLock l(&mu_);
  if (offset == next_offset_) {
    streak_ = std::min<uint32_t>(streak_ + 1, 16);
  } else {
    streak_ = 0;
  }
  next_offset_ = offset + n;
  if (streak_ == 0) return 0;
  return std::min<uint32_t>(ctx_.max_readahead_pages, 1u << std::min<uint32_t>(streak_ - 1, 5));
}

StatusOr<size_t> FileReaderImpl::Read(uint64_t offset, std::span<char> out) {
  return ReadPieces(offset, out, nullptr);
}

StatusOr<ReadView> FileReaderImpl::ReadInPlace(uint64_t offset, std::span<char> scratch) {
  ReadView view;
  CAIRN_RETURN_IF_ERROR(ReadPieces(offset, scratch, &view).status());
  return view;
}

StatusOr<size_t> FileReaderImpl::ReadPieces(uint64_t offset, std::span<char> out, ReadView* view) {
  const uint64_t size = object_.info.size;
  if (offset >= size || out.empty()) return size_t{0};
  size_t n = static_cast<size_t>(std::min<uint64_t>(out.size(), size - offset));
  const uint32_t ps = ctx_.fetcher->page_size();
  uint32_t window = UpdateStreak(offset, n);
  uint64_t last_page = (offset + n - 1) / ps;
  if (window > 0) StartReadahead(last_page + 1, window);

  size_t done = 0;
  while (done < n) {
    uint64_t pos = offset + done;
    uint64_t page = pos / ps;
    uint32_t in_page = static_cast<uint32_t>(pos % ps);
    uint32_t page_length = protocol::PageLength(size, page, ps);
    std::span<char> piece = out.subspan(done, std::min<size_t>(n - done, page_length - in_page));
    StatusOr<std::shared_ptr<const PageBuffer::Slot>> slot =
        ReadPiece(page, in_page, piece, window > 0);
    if (!slot.ok()) return slot.status();
    std::span<const char> bytes = piece;
    if (*slot) bytes = (*slot)->data().subspan(in_page, piece.size());
    if (view == nullptr) {
      if (*slot) std::memcpy(piece.data(), bytes.data(), bytes.size());
    } else {
      view->Append(bytes);
      if (*slot) view->owners.push_back(std::move(*slot));
    }
    done += piece.size();
  }
  return n;
}

StatusOr<std::shared_ptr<const PageBuffer::Slot>> FileReaderImpl::ReadPiece(uint64_t page,
                                                                            uint32_t in_page,
                                                                            std::span<char> out,
                                                                            bool sequential) {
  Hash128 id = PageId(page);
  std::shared_ptr<PageBuffer::Slot> slot = ctx_.buffer->Find(id);
  const uint32_t page_length =
      protocol::PageLength(object_.info.size, page, ctx_.fetcher->page_size());
  // A sequential reader will want the rest of this page next, and a whole-page read (large or
  // O_DIRECT reads, which the kernel may send out of order) is one readahead may also want:
  // fetch the page once, into the buffer, where both find it.
  const bool whole_page = in_page == 0 && out.size() == page_length;
  // A one-page object read whole (a dataset sample, a small file) by a client that asks for it:
  // the page goes straight into the caller's memory. Through a slot, each such file took fresh
  // memory (a partial page is not recycled), and in a new DataLoader worker the page faults on
  // it cost more than the read itself: 0.49 ms per 114 KB sample against 0.12 ms for a local
  // file (docs/benchmarks.md, "Small files read whole by the SDK, and forked DataLoader
  // workers").
  if (ctx_.unbuffered_small_files && !slot && whole_page && PageCount() == 1) {
    CAIRN_RETURN_IF_ERROR(ctx_.fetcher->ReadRange(object_, page, 0, out));
    ctx_.unbuffered_reads->fetch_add(1, std::memory_order_relaxed);
    return std::shared_ptr<const PageBuffer::Slot>();
  }
  if (!slot && (sequential || whole_page)) {
    slot = ctx_.buffer->Create(id, page_length);
    if (slot) {
      CAIRN_RETURN_IF_ERROR(FillSlot(object_, ctx_, page, id, slot.get()));
    } else {
      slot = ctx_.buffer->Find(id);  // Another reader created it meanwhile.
    }
  }
  if (slot && slot->Wait().ok() && slot->length >= in_page + out.size()) {
    ctx_.buffer_hits->fetch_add(1, std::memory_order_relaxed);
    return std::shared_ptr<const PageBuffer::Slot>(std::move(slot));
  }
  CAIRN_RETURN_IF_ERROR(ctx_.fetcher->ReadRange(object_, page, in_page, out));
  return std::shared_ptr<const PageBuffer::Slot>();
}

void FileReaderImpl::StartReadahead(uint64_t first_page, uint32_t window) {
  uint64_t end = std::min<uint64_t>(PageCount(), first_page + window);
  for (uint64_t page = first_page; page < end; ++page) {
    Hash128 id = PageId(page);
    if (ctx_.buffer->Find(id)) continue;
    auto slot = ctx_.buffer->Create(
        id, protocol::PageLength(object_.info.size, page, ctx_.fetcher->page_size()));
    if (!slot) continue;
    // The task holds copies of what it needs: the reader may be closed before it runs.
    ctx_.prefetch_pool->Submit([object = object_, ctx = ctx_, page, slot, id] {
      FillSlot(object, ctx, page, id, slot.get()).IgnoreError();  // Waiters see the status.
    });
  }
}

}  // namespace cairn::client
