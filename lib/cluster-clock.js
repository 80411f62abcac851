'use strict';
// The time of a store on a dqlite cluster: the caller's clock (`Date.now()`, fake timers
// included) plus this host's offset from the cluster leader's clock, which the core measures on
// every leader connection (src/sql/cluster_clock.rs says why and how). Every call that passes no
// `now` takes its time from here, so one clock, the leader's, orders every host's leases. A file
// store never comes here. Past OFFSET_WARNING_MS the host's clock is said to be off, once per
// leader, as a Node warning (docs/cluster.md, "Clocks").

/** An offset past which the hosts' clocks are worth setting right (docs/cluster.md, "Clocks"). */
const OFFSET_WARNING_MS = 1_000;

class ClusterClock {
  #native;
  #seen = 0;
  #warned = new Set();

  constructor(native) {
    this.#native = native;
    this.offset();
  }

  /** The ms to add to `Date.now()`; warns first when a new measurement found the clock off. */
  offset() {
    const native = this.#native;
    const measurements = native.clockMeasurements();
    if (measurements !== this.#seen) {
      this.#seen = measurements;
      this.#warnIfOff(this.reading());
    }
    return native.clockOffset();
  }

  /** The store's time for a call that passes no `now`. */
  now() {
    return Date.now() + this.offset();
  }

  /** The latest measurement: `{offsetMs, measuredOffsetMs, roundTripMs, leader, measurements}`. */
  reading() {
    const json = this.#native.clusterClock();
    return json === null ? null : JSON.parse(json);
  }

  #warnIfOff(reading) {
    if (reading === null || Math.abs(reading.offsetMs) <= OFFSET_WARNING_MS || this.#warned.has(reading.leader)) return;
    this.#warned.add(reading.leader);
    const direction = reading.offsetMs > 0 ? 'behind' : 'ahead of';
    process.emitWarning(
      `pi-workflows-native: this host's clock is ${Math.abs(reading.offsetMs)} ms ${direction} the clock of the cluster leader ${reading.leader}`,
      {
        code: 'PIW_CLUSTER_CLOCK_OFFSET',
        detail:
          "The store takes the cluster's time for every call that passes no `now`, so its leases stay safe; " +
          "a `now` you pass, and your own comparisons of a lease's expiry with Date.now(), are this far off: " +
          'add state.clusterClock.offsetMs. Set the clocks right (NTP) on the hosts and on the nodes.',
      },
    );
  }
}

module.exports = { ClusterClock };
