// Keeps a listener's checked TLS material current without a restart
// (docs/operations.md, "TLS"): a thread re-reads the files every poll
// interval through load_server_tls. Material that passes every check
// replaces the current one, and the next handshake uses it; material that
// fails keeps the current one, and the log says why, once per distinct
// failure (a rotation that writes the key and the certificate one after the
// other may fail once in between, then succeeds). Thread-safe.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "common/clock.h"
#include "common/status.h"
#include "tls/server_tls.h"

namespace dex::tls {

// How often the files are read: a rotation is in use within about this long.
inline constexpr Duration kTlsPollInterval = seconds(1);

class TlsWatcher {
 public:
  // Called on the watcher's thread after each accepted change, with the new
  // material and its generation (1 is the material start() read).
  using OnChange = std::function<void(const ServerTlsMaterial&, uint64_t generation)>;

  // Reads and checks the files (an error here fails startup, naming the key
  // and the file) and starts watching. `files` must be enabled().
  static StatusOr<std::unique_ptr<TlsWatcher>> start(const ServerTlsFiles& files,
                                                     Duration poll = kTlsPollInterval);
  ~TlsWatcher();
  TlsWatcher(const TlsWatcher&) = delete;
  TlsWatcher& operator=(const TlsWatcher&) = delete;

  const ServerTlsFiles& files() const { return files_; }
  std::shared_ptr<const ServerTlsMaterial> current() const;
  uint64_t generation() const;

  // Replaces the change callback (null: none); waits for a callback running
  // now, so the old callback's owner may be destroyed once this returns. The
  // callback must not call set_on_change or check_now.
  void set_on_change(OnChange on_change);

  // Reads the files now, as the thread does every poll; true when the
  // material changed. The thread calls it; tests may too.
  bool check_now();

 private:
  TlsWatcher(ServerTlsFiles files, ServerTlsMaterial first, Duration poll);
  void run();

  const ServerTlsFiles files_;
  const Duration poll_;
  mutable std::mutex mu_;
  std::shared_ptr<const ServerTlsMaterial> current_;  // guarded by mu_
  uint64_t generation_ = 1;                           // guarded by mu_
  std::string last_error_;                            // guarded by mu_: logged once
  OnChange on_change_;                                // guarded by mu_
  std::mutex check_mu_;                               // one check at a time (the thread, or a test)
  std::condition_variable stop_cv_;
  bool stop_ = false;  // guarded by mu_
  std::thread thread_;
};

}  // namespace dex::tls
