// Finding Flows from the client side (docs/search.md; docs/api.md, "Finding
// Flows"): the options of one SearchFlows page, and every page of a query as
// a range that fetches each page only when the loop reaches it.
//
//   for (const auto& page : client.search_pages("customer = 'ann' AND Status = 'RUNNING'")) {
//     if (!page.is_ok()) return page.status();  // an error is the last element
//     for (const flow::FlowSearchRow& row : page->rows()) use(row.flow_id(), total.get(row));
//   }
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "dex/flow_api.pb.h"

namespace dex {

class Client;

struct SearchOptions {
  // Rows per page: 0 is the server's default (100); at most 1000.
  int32_t page_size = 0;
  // Where to go on from: a page's next_page_token (a keyset cursor that names
  // its query); "" for the first page.
  std::string page_token;
  // Index keys each row carries besides those the query names.
  std::vector<std::string> fields;
};

// The pages of one query, in order, fetched one call at a time through
// Client::search_flows (so each page, like every read, is repeated on
// another address on UNAVAILABLE). Single pass: an input range. A failed
// call is the last element; a page whose next_page_token is "" is the last
// page. The Client must outlive it.
class SearchPages {
 public:
  using Page = StatusOr<flow::SearchFlowsResponse>;

  class iterator {
   public:
    using value_type = Page;
    using difference_type = std::ptrdiff_t;
    using iterator_concept = std::input_iterator_tag;

    iterator() = default;
    const Page& operator*() const { return *pages_->current_; }
    const Page* operator->() const { return &*pages_->current_; }
    iterator& operator++() {
      pages_->current_ = pages_->next();
      return *this;
    }
    void operator++(int) { ++*this; }
    friend bool operator==(const iterator& it, std::default_sentinel_t) { return it.at_end(); }

   private:
    friend class SearchPages;
    explicit iterator(SearchPages* pages) : pages_(pages) {}
    bool at_end() const { return pages_ == nullptr || !pages_->current_.has_value(); }
    SearchPages* pages_ = nullptr;
  };

  SearchPages(Client& client, std::string query, SearchOptions options);

  // Fetches the first page (once: a second begin() goes on where the first left).
  iterator begin();
  std::default_sentinel_t end() const { return std::default_sentinel; }

  // Pulled by hand: the next page, or std::nullopt after the last page or an error.
  std::optional<Page> next();
  // Calls made so far.
  size_t pages_fetched() const { return fetched_; }

 private:
  Client* client_;
  std::string query_;
  SearchOptions options_;  // page_token: where the next call starts
  bool started_ = false;
  bool done_ = false;
  size_t fetched_ = 0;
  std::optional<Page> current_;  // what the iterator shows
};

}  // namespace dex
