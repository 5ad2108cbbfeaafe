/*
 * The node lease and the fenced log, as a Promela model for spin.
 *
 * docs/model.md explains the abstractions, how each element maps to
 * src/lease and src/log, and the figures; tests/model/check.sh runs it.
 *
 * Properties: (a) no acknowledged batch is lost, (b) nothing of an older
 * epoch is acknowledged above a newer EpochStart, (c) at most one valid lease
 * (assertions, checked wherever their value can change), (d) a released lease
 * is eventually taken (ltl, with -DLIVENESS, under weak fairness).
 *
 * Configuration (spin -D...):
 *   NP=2|3          processes (each: a lease keeper and a log writer)
 *   NB=n            batches a writer writes after its EpochStart
 *   NS=n            slots in the model's log (a bound of the model, not of dex)
 *   MARGIN=n        GC keeps this many slots below the holder's log end
 *                   (kGcKeepSlotsMin = 1000 in dex)
 *   MAXF=n          lost answers and cut-offs of log writes, all writers together
 *   MAXREN=n        renewals per holder
 *   MAXEP=n         the highest epoch
 *   CRASHES         processes may crash (MAXCRASH of them)
 *   SETTLE_EARLY    the epoch may count as settled at any time (the residual
 *                   case of docs/log.md "A settled epoch")
 *   BROKEN_CLOCKS   a takeover does not end the old holder's validity (the
 *                   lease's timing assumption fails); (c) is not checked
 *   LIVENESS        adds the ltl formula (d); no symmetry reduction
 *   NO_WRITER       keepers only (the lease alone)
 *   PROBES          reachability probes (below)
 *   BUG_*           deliberately broken variants that spin must reject
 *
 * By hand:  spin -DNP=2 -a lease_log.pml && cc -O2 -DSAFETY -o pan pan.c && ./pan
 *           spin -t -k lease_log.pml.trail lease_log.pml   (replays a violation)
 */

#ifndef NP
#define NP 2
#endif
#ifndef NB
#define NB 2
#endif
#ifndef NS
#define NS 8
#endif
#ifndef MARGIN
#define MARGIN 2
#endif
#ifndef MAXF
#define MAXF 2
#endif
#ifndef MAXREN
#define MAXREN 1
#endif
#ifndef MAXCRASH
#define MAXCRASH 1
#endif
#ifndef MAXEP
#define MAXEP (NP + 1)
#endif

#ifdef BUG_GC_NO_MARGIN
#undef MARGIN
#define MARGIN 0
#endif

#ifdef CRASHES
#define UNLESS_CRASHED(then) unless { atomic { crashed[me] -> then } }
#else
#define UNLESS_CRASHED(then)
#endif

/*
 * Symmetry: processes differ only by name, and every property is invariant
 * under renaming them. So only executions in which processes land their first
 * acquisition write in the order of their names are explored: any other
 * execution is one of these with the processes renamed. An acquisition write
 * that would land out of order waits; one that fails never waits. (Not for
 * LIVENESS, where a process waiting by this rule would look starved.)
 */
#if defined(LIVENESS) || defined(NO_SYMMETRY)
#define FIRST_IN_ORDER true
#else
#define FIRST_IN_ORDER (me == 0 || took[me] || took[me - 1])
#endif

/*
 * Reachability probes: built with -DPROBES, the verifier reports reaching
 * scenario n (n from the environment variable DEX_PROBE) as an assertion
 * violation. check.sh requires every probe to be reached, so the properties
 * are not checked vacuously over a model that never gets there.
 */
#ifdef PROBES
byte probe;
#define REACH(n, cond) if :: probe == n && (cond) -> assert(false) :: else -> skip fi
#else
#define REACH(n, cond) skip
#endif

/* Batch ids: process p's EpochStart is BID(p, 0), its batches BID(p, 1..NB). */
#define NBID (NP * (NB + 1) + 1)
#define BID(p, seq) ((p) * (NB + 1) + (seq) + 1)
#define BID_PROC(b) (((b) - 1) / (NB + 1))
#define BID_SEQ(b) (((b) - 1) % (NB + 1))

/* A log write request (create-only PUT of one slot). */
#define W_NONE 0      /* nothing sent */
#define W_INFLIGHT 1  /* sent; the store has not applied it (yet) */
#define W_LANDED 2    /* applied: the slot was free and now holds this batch */
#define W_FAILED 3    /* refused: the slot already existed (PreconditionFailed) */

/* Lease keeper phases (LeaseState: acquiring, holding, and everything after). */
#define K_ACQ 0
#define K_HOLD 1
#define K_DONE 2

/* ---- the lease object: nodes/<id>/lease (src/lease/lease_record.*) */
byte l_ver;     /* ETag: 0 = absent; every landed write makes it l_ver + 1 */
byte l_epoch;
byte l_holder;
bool l_rel;     /* released */

/* ---- abstract time (docs/model.md, "Time") */
byte dead_ver;     /* every lease period resting on a version <= dead_ver has ended */
bool valid[NP];    /* LeaseMachine::is_valid(now) of each process */

/* ---- processes */
byte kphase[NP];   /* the keeper's phase */
byte my_ep[NP];    /* the epoch the process holds / held (0: never held) */
bool crashed[NP];
bool wdone[NP];    /* the process's LogWriter has stopped for good */
bool took[NP];     /* an acquisition write of the process has landed */
byte waitv[NP];    /* the version a waiting process watches (0: not waiting) */
#if NP > 2
#define WAITED_ON (waitv[0] == l_ver || waitv[1] == l_ver || waitv[2] == l_ver)
#else
#define WAITED_ON (waitv[0] == l_ver || waitv[1] == l_ver)
#endif
byte faults;       /* lost answers and cut-offs so far */
byte ncrash;

/* ---- the log: nodes/<id>/log/<slot> (src/log/log_format.*) */
byte s_ep[NS];     /* 0 = no object */
byte s_bid[NS];
byte rstart;       /* replay start: the newest snapshot's slot + 1; GC deletes below it */

/* each writer's one log request (at most one batch write in flight) */
byte w_slot[NP];
byte w_bid[NP];
byte w_state[NP];

/* ---- ghosts for the properties */
bool acked[NBID];
bool covered[NBID];   /* applied by a snapshot taken before its slot was collected */
byte es_ghost[NS];    /* highest epoch of an EpochStart that ever landed at the slot */
byte e_hi;            /* scratch for the snapshot replay (always 0 between steps) */


/* ------------------------------------------------------------------ properties */

/* Scratch for the checks: always 0 between steps, so they add no states. */
byte c_k, c_j, c_hi, c_n;
int c_dm;

/*
 * (a) No acknowledged batch is lost: every acknowledged batch is covered by a
 * snapshot, or a replay from the replay start delivers it (LogReader::next:
 * lower epochs are skipped; a hole, or a new epoch that does not begin with
 * an EpochStart, is Corruption). Only landings, deletes, a new replay start
 * and acknowledgements can change its value, so it is checked after each.
 */
inline check_a() {
  c_k = rstart; c_hi = 0; c_n = 0; c_dm = 0;
  do
  :: c_k < NS && s_ep[c_k] != 0 ->
     if
     :: s_ep[c_k] < c_hi -> skip
     :: else ->
        assert(!(c_n > 0 && s_ep[c_k] > c_hi && BID_SEQ(s_bid[c_k]) != 0));
        c_hi = s_ep[c_k]; c_n++; c_dm = c_dm | (1 << s_bid[c_k])
     fi;
     c_k++
  :: c_k < NS && s_ep[c_k] == 0 ->
     c_j = c_k + 1;
     do
     :: c_j < NS -> assert(s_ep[c_j] == 0); c_j++    /* no hole above the replay start */
     :: else -> break
     od;
     break
  :: c_k >= NS -> break
  od;
  c_k = 1;
  do
  :: c_k < NBID ->
     assert(!acked[c_k] || covered[c_k] || ((c_dm >> c_k) & 1));
     c_k++
  :: else -> break
  od;
  c_k = 0; c_j = 0; c_hi = 0; c_n = 0; c_dm = 0
}

/* (c) At most one process holds a valid lease; checked whenever one becomes valid. */
#ifndef BROKEN_CLOCKS
#if NP > 2
#define check_c() assert(valid[0] + valid[1] + valid[2] <= 1)
#else
#define check_c() assert(valid[0] + valid[1] <= 1)
#endif
#else
#define check_c() skip
#endif

/* ------------------------------------------------------------------ store */

/* The store applies an in-flight create: at most one create of a slot succeeds. */
inline land(p) {
  atomic {
    w_state[p] == W_INFLIGHT ->
    if
    :: s_ep[w_slot[p]] == 0 ->
       s_ep[w_slot[p]] = my_ep[p];
       s_bid[w_slot[p]] = w_bid[p];
       if
       :: BID_SEQ(w_bid[p]) == 0 && es_ghost[w_slot[p]] < my_ep[p] -> es_ghost[w_slot[p]] = my_ep[p]
       :: else -> skip
       fi;
       w_state[p] = W_LANDED;
       printf("store: P%d's batch %d (epoch %d) lands in slot %d\n", p, w_bid[p], my_ep[p], w_slot[p]);
       REACH(1, wdone[p]);                 /* a write lands after its writer stopped */
       REACH(2, w_slot[p] < rstart);       /* ... and re-creates a collected slot */
       check_a()
    :: else -> w_state[p] = W_FAILED;
       printf("store: P%d's create of slot %d fails: it exists\n", p, w_slot[p])
    fi
  }
}

/* A request of a stopped writer that never reaches the store. */
inline drop(p) {
  atomic { w_state[p] == W_INFLIGHT && wdone[p] -> w_state[p] = W_NONE; w_slot[p] = 0; w_bid[p] = 0 }
}

inline expire(p) {
  atomic { valid[p] -> valid[p] = false; printf("time: P%d's lease period ends by its own clock\n", p) }
}

inline crash(p) {
  atomic { ncrash < MAXCRASH && !crashed[p] && kphase[p] != K_DONE ->
           ncrash++; crashed[p] = true; valid[p] = false; printf("P%d crashes\n", p) }
}

/*
 * The environment: time passing, the store applying requests late, crashes.
 * A freeze needs no event: a process is simply not scheduled, while these
 * events stay enabled.
 */
active proctype env() {
end_env:
  do
  /* A waiter's duration + 1 s without a change of the record has passed: every
   * period resting on the current version (or an older one) has ended. */
  :: atomic {
       dead_ver < l_ver && WAITED_ON ->
       dead_ver = l_ver;
       printf("time: expiry of lease version %d observed: every period on it has ended\n", l_ver);
#ifndef BROKEN_CLOCKS
       valid[0] = false;
       valid[1] = false;
#if NP > 2
       valid[2] = false;
#endif
#endif
     }
  /* A process's own clock passes its period's end (a freeze, a slow renewal). */
  :: expire(0)
  :: expire(1)
#if NP > 2
  :: expire(2)
#endif
  :: land(0)
  :: land(1)
#if NP > 2
  :: land(2)
#endif
  :: drop(0)
  :: drop(1)
#if NP > 2
  :: drop(2)
#endif
#ifdef CRASHES
  :: crash(0)
  :: crash(1)
#if NP > 2
  :: crash(2)
#endif
#endif
  od
}

/* ------------------------------------------------------------------ lease */

/* become_holder: valid from now; the dead locals are cleared. */
inline become_holder(epoch, ver) {
  valid[me] = true; my_ep[me] = epoch; cv = ver; kphase[me] = K_HOLD;
  printf("P%d holds the lease: epoch %d, version %d\n", me, epoch, ver);
  check_c();
  v = 0; e = 0; h = 0; w = 0; r = false
}

/*
 * send_acquire_read and on_acquire_read: read the record and decide. The
 * decision is taken at the read; what changes after it is found by the
 * conditional write failing, or by the next poll.
 */
inline read_and_decide() {
  v = l_ver; e = l_epoch; h = l_holder; r = l_rel;
  if
  :: v == 0 -> e = 0; goto take                  /* absent: Create at epoch 1 */
#ifndef BUG_TAKE_RELEASED_WITH_CREATE
  :: v != 0 && r -> REACH(11, true); goto take  /* released: epoch + 1 at once */
#else
  :: v != 0 && r -> v = 0; goto take            /* BUG: Create (If-None-Match) on a released record */
#endif
  :: v != 0 && !r && h == me ->
     /* ours: an acquisition write of ours landed although its answer was
      * lost. Adopt it while its period leaves room, else take it again. */
     if
     :: v > dead_ver -> REACH(10, true); become_holder(e, v); goto hold
     :: true -> goto take      /* by our own clock its period no longer leaves room */
     fi
  :: v != 0 && !r && h != me -> waitv[me] = v; goto end_wait   /* held: wait_held */
  fi
}

/* LeaseMachine (src/lease/lease_machine.cc) driven by LeaseKeeper. */
proctype keeper(byte me) {
  byte v, e, h, w, cv, ren;
  bool r, ok;
  {
  skip;
  atomic { read_and_decide() };

end_wait:
  /* held by another process: wait until the expiry was observed (the same
   * version for the record's duration + 1 s of our own clock) */
  if
#ifndef BUG_NO_EXPIRY_WAIT
  :: atomic { dead_ver >= v -> waitv[me] = 0; REACH(9, true); goto take }  /* expired */
#else
  :: atomic { true -> waitv[me] = 0; goto take }
#endif
  :: atomic { l_ver != v -> waitv[me] = 0; read_and_decide() }  /* a poll shows a new ETag */
  fi;

take:
  /* send_acquire_write: Create, or Replace(etag) at epoch + 1 */
end_take:
  atomic {
    (l_ver != v || FIRST_IN_ORDER) ->
    if
    :: e >= MAXEP -> kphase[me] = K_DONE; goto out   /* a bound of the model: no epoch above MAXEP */
    :: else -> skip
    fi;
    if
    :: l_ver == v -> l_ver++; l_epoch = e + 1; l_holder = me; l_rel = false; w = l_ver; ok = true;
       took[me] = true;
       printf("P%d's acquisition write lands: epoch %d, version %d\n", me, l_epoch, l_ver)
    :: else -> ok = false
    fi
  };
  /* on_acquire_write */
  atomic {
    if
#ifndef BROKEN_CLOCKS
    :: ok && w > dead_ver -> ok = false; become_holder(e + 1, w); goto hold
#else
    :: ok -> ok = false; become_holder(e + 1, w); goto hold
#endif
    :: ok -> ok = false; w = 0; read_and_decide()  /* answer lost or after its deadline: read (§5) */
    :: !ok -> w = 0; read_and_decide()             /* PreconditionFailed: read again */
    fi
  };

hold:
  do
  :: atomic { !valid[me] -> kphase[me] = K_DONE; break }  /* the machine stops at its next wake */
  :: atomic {
       valid[me] && ren < MAXREN ->
       /* send_renew_write: Replace(etag) with renewal_count + 1, same epoch.
        * Its answer (on_renew_write, or on_renew_read adopting our own landed
        * attempt) is taken in the same step: a waiter that reads the new
        * version in between sees what it sees after the answer, and an answer
        * that comes too late is the second branch. */
       ren++;
       if
       :: l_ver == cv -> l_ver++; cv = l_ver      /* renewed: a new period */
       :: l_ver == cv -> l_ver++; valid[me] = false  /* landed, but answered after the cutoff */
       :: l_ver != cv -> valid[me] = false        /* another holder: lost */
       fi;
       printf("P%d renews: version %d, still valid %d\n", me, l_ver, valid[me])
     }
  :: atomic {
       valid[me] ->
       /* request_release: invalid at once, then Replace(etag) with released */
#ifndef BUG_RELEASE_STILL_VALID
       valid[me] = false;
#endif
       if
       :: l_ver == cv -> l_ver++; l_rel = true; printf("P%d releases the lease: version %d\n", me, l_ver)
       :: else -> skip                /* lost meanwhile: nothing to release */
       fi;
#ifndef BUG_RELEASE_STILL_VALID
       kphase[me] = K_DONE; break
#endif
     };
#ifdef BUG_RELEASE_STILL_VALID
     atomic { valid[me] = false; kphase[me] = K_DONE; break }
#endif
  od;
out:
  skip
  } UNLESS_CRASHED(kphase[me] = K_DONE)
}

/* ------------------------------------------------------------------ log */

/* (b): after an EpochStart of epoch e at slot t, nothing of an epoch < e is
 * acknowledged at a slot > t. Checked at every acknowledgement. */
inline check_b(at, epoch) {
  c_k = 0;
  do
  :: c_k < at -> assert(es_ghost[c_k] <= epoch); c_k++
  :: else -> break
  od;
  c_k = 0
}

inline clear_request() {
  w_state[me] = W_NONE; w_slot[me] = 0; w_bid[me] = 0
}

/* The write is durable: acknowledge it only under a valid lease. */
inline acknowledge() {
#ifndef BUG_ACK_WITHOUT_LEASE_CHECK
  if
  :: !valid[me] ->
     printf("P%d: batch %d in slot %d written, lease not valid: not acknowledged\n", me, bid, slot);
     REACH(3, seq > 0); goto stop   /* not acknowledged, outcome unknown */
  :: else -> skip
  fi;
#endif
  if
  :: seq == 0 -> es = slot;       /* open() returns: the EpochStart is written */
     printf("P%d: EpochStart of epoch %d in slot %d\n", me, ep, slot)
  :: else ->
     acked[bid] = true;
     printf("P%d: batch %d (epoch %d) in slot %d ACKNOWLEDGED\n", me, bid, ep, slot);
     REACH(4, ep > 1 && rstart > 0);       /* a later epoch's batch acknowledged after a GC */
     check_b(slot, ep);
     check_a()
  fi;
  seq++;
  slot++
}

/* LogWriter (src/log/log_writer.cc) with the Snapshotter's collect_garbage
 * (src/log/log_gc.cc, src/snapshot/snapshot.cc). */
proctype writer(byte me) {
  byte ep, slot, seq, bid, es, below, k;
  bool settled;
  {
  skip;
end_idle:
  /* once the keeper holds the lease, open(): the lease; find_log_bounds (the
   * end is one past the highest existing slot); the last batch: an epoch >=
   * ours means a newer holder started */
  atomic {
    (my_ep[me] != 0 || kphase[me] == K_DONE) -> ep = my_ep[me];
    if
    :: ep == 0 || !valid[me] -> goto stop
    :: else -> skip
    fi;
    slot = 0; k = 0;
    do
    :: k < NS -> if :: s_ep[k] != 0 -> slot = k + 1 :: else -> skip fi; k++
    :: else -> break
    od;
    k = 0;
    if
    :: slot > 0 && s_ep[slot - 1] >= ep ->
       printf("P%d: open(): slot %d has epoch %d, not below %d: fenced\n", me, slot - 1, s_ep[slot - 1], ep);
       goto stop
    :: else -> printf("P%d: open(): the log ends at slot %d\n", me, slot)
    fi
  };

attempt:
  /* create_slot: slots strictly in sequence; before every attempt the lease:
   * with no valid lease there is nothing to write. Then the request goes out.
   * (A freeze between the check and the send is a request that lands late.) */
  atomic {
    if
    :: slot >= NS -> goto stop      /* the model's log is full (a bound of the model) */
    :: !valid[me] -> goto stop
    :: else -> bid = BID(me, seq); w_slot[me] = slot; w_bid[me] = bid; w_state[me] = W_INFLIGHT
    fi
  };

await:
  /* the answer */
  atomic {
    if
    :: w_state[me] == W_INFLIGHT && faults < MAXF ->     /* cut off */
       faults++; printf("P%d: slot %d: no answer in time, retry\n", me, slot); goto retry
    :: w_state[me] == W_INFLIGHT ->                      /* the 10 s write limit; it may still land */
       printf("P%d: slot %d: write limit, stop (the request is still in flight)\n", me, slot); goto stop
    :: w_state[me] == W_LANDED && faults < MAXF ->       /* answer lost */
       faults++; printf("P%d: slot %d: answer lost, retry\n", me, slot); goto retry
    :: w_state[me] == W_LANDED -> clear_request(); acknowledge()
    :: w_state[me] == W_FAILED ->
       /* PreconditionFailed: read the slot ("Ambiguous success") */
       clear_request();
       if
       :: s_bid[slot] == bid ->                          /* our own earlier attempt: adopted */
          printf("P%d: slot %d exists and holds our batch %d: adopted\n", me, slot, bid);
          REACH(5, true); acknowledge()
       :: s_bid[slot] != bid && s_ep[slot] == 0 ->       /* collected by a newer holder: fenced */
          printf("P%d: slot %d exists, then is gone: fenced\n", me, slot); goto stop
       :: s_bid[slot] != bid && s_ep[slot] != 0 ->
          if
#ifndef BUG_WRITER_SKIPS_TAKEN_SLOT
          :: seq == 0 && s_ep[slot] < ep ->                /* open(): move on */
             printf("P%d: slot %d holds epoch %d: moving on\n", me, slot, s_ep[slot]);
             REACH(6, true); slot++; goto attempt
          :: else ->                                         /* fenced */
             printf("P%d: slot %d holds epoch %d: fenced\n", me, slot, s_ep[slot]); goto stop
#else
          :: true -> slot++; goto attempt          /* BUG: move on past any taken slot */
#endif
          fi
       fi
    fi;
    /* acknowledged: the next batch, or first a snapshot and log GC */
    if
    :: seq <= NB -> goto attempt
    :: seq > 1 -> goto gc
    :: seq > NB -> goto stop        /* close(): everything written */
    fi
  };

retry:
  /* the lease, then the same bytes to the same slot again; a request still
   * in flight is the same write */
  atomic {
    if
    :: !valid[me] -> goto stop
    :: else -> w_state[me] = W_INFLIGHT; goto await
    fi
  };

gc:
  /* Snapshotter::snapshot: the snapshot, then collect_garbage below it */
  atomic {
    if
    :: !valid[me] -> goto next
    :: else -> skip
    fi;
#if defined(SETTLE_EARLY) || defined(BUG_GC_DELETES_EPOCH_START)
    settled = true;
#else
    /* settled: every older writer has stopped, with nothing in flight */
    settled = true;
    k = 0;
    do
    :: k < NP ->
       if
       :: k != me && my_ep[k] != 0 && my_ep[k] < ep && (!wdone[k] || w_state[k] == W_INFLIGHT) ->
          settled = false
       :: else -> skip
       fi;
       k++
    :: else -> break
    od;
#endif
    /* never within MARGIN of the log end; not past the EpochStart unless settled */
    if
    :: slot >= MARGIN -> below = slot - MARGIN
    :: else -> below = 0
    fi;
    if
    :: !settled && below > es -> below = es
    :: settled && below > es -> REACH(7, true)    /* settled: past the EpochStart */
    :: else -> skip
    fi;
    if
    :: below <= rstart -> goto next
    :: else -> skip
    fi;
    /* the snapshot covers what a replay from the current start delivers below
     * `below` (the holder has applied all of it); restores start there now */
    k = rstart; e_hi = 0;
    do
    :: k < below ->
       assert(s_ep[k] != 0);
       if
       :: s_ep[k] >= e_hi -> e_hi = s_ep[k]; covered[s_bid[k]] = true
       :: else -> skip               /* a lower epoch: the reader skips it */
       fi;
       k++
    :: else -> break
    od;
    e_hi = 0;
    printf("P%d: snapshot through slot %d, collect below it (settled %d)\n", me, below - 1, settled);
    rstart = below;
    check_a();
    k = 0
  };
gcdel:
  /* the next existing slot below `below`, lowest first; the lease before every delete */
  atomic {
    do
    :: k < below && s_ep[k] == 0 -> k++
    :: else -> break
    od;
    if
    :: k >= below || !valid[me] -> goto next
    :: else -> skip
    fi
  };
  /* the delete goes out; it may land after a freeze */
  atomic {
    REACH(8, acked[s_bid[k]] && BID_PROC(s_bid[k]) != me);   /* another writer's acknowledged batch collected */
    printf("P%d: deletes slot %d\n", me, k);
    s_ep[k] = 0; s_bid[k] = 0; k++; check_a()
  };
  goto gcdel;

next:
  atomic {
    k = 0; below = 0; settled = false;
    if
    :: seq <= NB -> goto attempt
    :: else -> goto stop
    fi
  };

stop:
  atomic { ep = 0; k = 0; slot = 0; seq = 0; bid = 0; es = 0; below = 0; settled = false; wdone[me] = true }
  } UNLESS_CRASHED(wdone[me] = true)
}

#ifdef LIVENESS
#if NP > 2
#define WAITING (kphase[0] == K_ACQ || kphase[1] == K_ACQ || kphase[2] == K_ACQ)
#else
#define WAITING (kphase[0] == K_ACQ || kphase[1] == K_ACQ)
#endif
/* (d) a released lease is eventually taken, unless no process is left to take it */
ltl released_is_taken { [] (l_rel -> <> (!l_rel || !WAITING)) }
#endif

init {
  atomic {
#ifdef PROBES
    c_code { now.probe = getenv("DEX_PROBE") ? atoi(getenv("DEX_PROBE")) : 0; };
#endif
    run keeper(0);
    run keeper(1);
#if NP > 2
    run keeper(2);
#endif
#ifndef NO_WRITER
    run writer(0);
    run writer(1);
#if NP > 2
    run writer(2);
#endif
#endif
  }
}
