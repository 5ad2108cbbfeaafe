/*
 * The filesystem backend's log slots in segment files, as a Promela model for spin
 * (src/objstore/slot_segments.h; docs/log.md "On the filesystem backend: segments";
 * tests/model/check_segments.sh runs it).
 *
 * NW writers (processes sharing the directory) each create the slots 0..NS-1 in order, as a
 * log writer does: read what the segments hold; if the slot is taken, move on; else append a
 * PUT to the newest segment it knows, then read up to its own record to learn whether it won
 * (append, then verify). A full segment is rolled: a SEAL, then the next segment (made once,
 * whoever is first). An append may tear (bytes every reader skips; then the writer tries
 * again). One append is atomic (O_APPEND: the kernel places each write whole); between a
 * writer's read, its append and its verify, anything may happen.
 *
 * The rule every reader applies, in the order segment, offset: a PUT of a live slot, and
 * anything after a segment's first SEAL, is void.
 *
 * Properties (assertions):
 *  (a) at most one writer is told it created a slot;
 *  (b) the slot's winner, as any reader computes it, never changes once there is one, and is
 *      the writer told so;
 *  (c) when every writer is done, every slot has the winner it was told.
 * Removal (TOMB) is not modelled: GC removes whole prefixes behind the holder (docs/log.md).
 *
 * Configuration (spin -D...): NW writers, NS slots, NSEG segments, CAP records before a
 * segment counts as full, TEARS torn appends in all; BUG_NO_VERIFY (a writer takes its
 * append as won) and BUG_IGNORE_SEAL (the rule forgets SEALs) must be caught.
 */

#ifndef NW
#define NW 2
#endif
#ifndef NS
#define NS 2
#endif
#ifndef NSEG
#define NSEG 3
#endif
#ifndef CAP
#define CAP 2
#endif
#ifndef TEARS
#define TEARS 1
#endif

/* A segment may run past CAP by what the writers append before they see it full. */
#define MAXR (CAP + 2 * NW + 1)

#define PUT 1
#define SEAL 2
#define TORN 3

byte rtype[NSEG * MAXR];
byte rslot[NSEG * MAXR];
byte rwriter[NSEG * MAXR];
byte nrec[NSEG];
byte nseg = 1;
byte tears = TEARS;
byte told[NS];  /* 0: nobody; else the writer + 1 */
byte seen[NS];  /* the winner a reader saw first */
byte done = 0;

/* The winner of slot s (writer + 1, or 0) by the rule, over everything appended. */
inline winner_of(s, out) {
  out = 0;
  i = 0;
  do
  :: i < nseg && out == 0 ->
     j = 0;
     do
     :: j < nrec[i] ->
#ifndef BUG_IGNORE_SEAL
        if
        :: rtype[i * MAXR + j] == SEAL -> break
        :: else -> skip
        fi;
#endif
        if
        :: rtype[i * MAXR + j] == PUT && rslot[i * MAXR + j] == s && out == 0 ->
           out = rwriter[i * MAXR + j] + 1
        :: else -> skip
        fi;
        j++
     :: else -> break
     od;
     i++
  :: else -> break
  od
}

/* What became of the record at (g, pos): 1 won, 2 void as the slot was live, 0 void after a
   SEAL. */
inline outcome_of(g, pos, s, out) {
  out = 1;
  i = 0;
  do
  :: i <= g && out != 0 ->
     j = 0;
     do
     :: (i < g && j < nrec[i]) || (i == g && j < pos) ->
#ifndef BUG_IGNORE_SEAL
        if
        :: rtype[i * MAXR + j] == SEAL -> if :: i == g -> out = 0 :: else -> skip fi; break
        :: else -> skip
        fi;
#endif
        if
        :: rtype[i * MAXR + j] == PUT && rslot[i * MAXR + j] == s && out == 1 -> out = 2
        :: else -> skip
        fi;
        j++
     :: else -> break
     od;
     i++
  :: else -> break
  od
}

inline append(g, type, s, w) {
  assert(nrec[g] < MAXR);  /* the model's bound, not dex's */
  rtype[g * MAXR + nrec[g]] = type;
  rslot[g * MAXR + nrec[g]] = s;
  rwriter[g * MAXR + nrec[g]] = w;
  nrec[g]++
}

inline sealed(g, out) {
  out = 0;
  j = 0;
  do
  :: j < nrec[g] -> if :: rtype[g * MAXR + j] == SEAL -> out = 1; break :: else -> j++ fi
  :: else -> break
  od
}

proctype writer(byte w) {
  byte s = 0, g, pos, out, i, j, isfull;
  do
  :: s < NS ->
     /* Read: is the slot taken, which segment is newest, is it sealed or isfull? */
     atomic {
       winner_of(s, out);
       g = nseg - 1;
       sealed(g, isfull);
       isfull = isfull || (nrec[g] >= CAP && nseg < NSEG)
     }
     if
     :: out != 0 -> s++  /* taken: PreconditionFailed, the next slot */
     :: out == 0 && isfull ->
        /* Roll: SEAL the newest (again, if another did: void), then make the next. */
        atomic { sealed(g, out); if :: out == 0 -> append(g, SEAL, 0, w) :: else -> skip fi };
        atomic { if :: nseg == g + 1 && nseg < NSEG -> nseg++ :: else -> skip fi }
     :: out == 0 && !isfull ->
        if
        :: atomic { tears > 0 -> tears--; append(g, TORN, s, w) }  /* then try again */
        :: atomic { pos = nrec[g]; append(g, PUT, s, w) };
#ifdef BUG_NO_VERIFY
           out = 1;
#else
           atomic { outcome_of(g, pos, s, out) };
#endif
           if
           :: out == 1 -> atomic { assert(told[s] == 0); told[s] = w + 1 }; s++
           :: out == 2 -> s++
           :: out == 0 -> skip  /* after a SEAL: append again, to the next segment */
           fi
        fi
     fi
  :: else -> break
  od;
  atomic { done++ }
}

/* Any process reading at any time. */
active proctype reader() {
  byte s, out, i, j;
  do
  :: atomic {
       s = 0;
       do
       :: s < NS ->
          winner_of(s, out);
          if
          :: out != 0 && seen[s] == 0 -> seen[s] = out
          :: out != 0 && seen[s] != 0 -> assert(seen[s] == out)
          :: else -> skip
          fi;
          assert(told[s] == 0 || told[s] == out);
          s++
       :: else -> break
       od
     }
  :: done == NW -> break
  od;
  s = 0;
  do
  :: s < NS -> winner_of(s, out); assert(out != 0 && told[s] == out); s++
  :: else -> break
  od
}

init {
  byte w = 0;
  atomic {
    do
    :: w < NW -> run writer(w); w++
    :: else -> break
    od
  }
}
