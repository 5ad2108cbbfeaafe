#include "sdk/search.h"

#include <ranges>

#include "sdk/client.h"

namespace dex {

static_assert(std::ranges::input_range<SearchPages>);

SearchPages::SearchPages(Client& client, std::string query, SearchOptions options)
    : client_(&client), query_(std::move(query)), options_(std::move(options)) {}

SearchPages::iterator SearchPages::begin() {
  if (!started_) {
    started_ = true;
    current_ = next();
  }
  return iterator(this);
}

std::optional<SearchPages::Page> SearchPages::next() {
  if (done_) return std::nullopt;
  Page page = client_->search_flows(query_, options_);
  ++fetched_;
  if (!page.is_ok()) {
    done_ = true;
    return page;
  }
  const std::string& token = page->next_page_token();
  // A token that does not move on would repeat the same page for ever: a
  // server's bug, but the loop stays bounded.
  if (token.empty() || token == options_.page_token) done_ = true;
  options_.page_token = token;
  return page;
}

}  // namespace dex
