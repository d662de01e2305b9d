// The restart library's keys in the job's store: one schema shared by the
// loop (restart/loop/) and the monitor process (restart/monitor/). Every key
// lives under "resilient/<jobId>/"; docs/restart.md lists them.
//
//   rank/<r>/identity        JSON: host, pid, monitor pid of initial rank r (claimed
//                            with compare-and-set: a job id in use is refused)
//   terminated/<r>           set (value: the reason) once initial rank r is out for good
//   terminated/count         counter; terminated/list/<i> (1-based) = the i-th rank
//                            terminated (readers keep a cursor: one get per poll)
//   terminated/epoch         set by the first mark in a store instance: a reader
//                            that sees it change reads the list from the start
//   heartbeat/<r>            wall-clock ns, kept by r's monitor process (expiring)
//   faults/count             counter; faults/<i> (1-based) is a fault record (JSON)
//   iteration/<k>/interrupted  set by the first fault of iteration k (value: its reason)
//   iteration/<k>/abort/<r>  wall-clock ns at which initial rank r began iteration k's
//                            abort (set before it closes anything; the culprits' clock)
//   iteration/<k>/first-abort the least of them once a rank lowered it (compare-and-set)
//   iteration/<k>/spare/<r>  present while initial rank r is a spare in iteration k
//   iteration/<k>/storm      the restart-storm verdict after iteration k's fault
//   iteration/<k>/completion the one decision of iteration k's end
//   iteration/<k>/comm/...   the iteration's rendezvous (communicator ids)
//   iteration/<k>/verdict    the one verdict after iteration k's barrier (culprits,
//                            terminated ranks, joiners admitted, root record),
//                            or the claim of the rank computing it
//   iteration/<k>/verdict-ready  set once that verdict is there
//   joiners/count, joiners/<n>/admitted, iteration/<k>/world, finished:
//                            processes joining the running job
//                            (restart/loop/job/joiners.h)
// Barriers (store barriers; re-entrant: anyone may count a rank):
//   "<prefix>initial"      generation 0       all initial ranks
//   "<prefix>iteration"    generation k       all initial ranks (terminated ones counted for them)
//   "<prefix>completion"   generation k       all initial ranks
//   "<prefix>termination"  generation 0       all initial ranks
#pragma once

#include <cstdint>
#include <string>

namespace resilient::restart::protocol {

class JobKeys {
 public:
  explicit JobKeys(const std::string& jobId);

  const std::string& jobId() const noexcept { return jobId_; }
  const std::string& prefix() const noexcept { return prefix_; }
  std::string identity(int initialRank) const;
  std::string terminated(int initialRank) const;
  std::string terminatedCount() const;
  std::string terminatedEntry(int64_t index) const;
  std::string terminatedEpoch() const { return prefix_ + "terminated/epoch"; }
  std::string heartbeat(int initialRank) const;
  std::string faultCount() const;
  std::string fault(int64_t index) const;
  std::string interrupted(int iteration) const;
  // When `initialRank` began iteration k's abort (wall-clock ns, decimal):
  // set before its abort closes any connection, so a peer's fault that names
  // it and was detected earlier is not a consequence of that abort
  // (restart/loop/job/culprits.h).
  std::string abortBegun(int iteration, int initialRank) const {
    return ofIteration(iteration, "abort/" + std::to_string(initialRank));
  }
  // The earliest abort of iteration k known so far (wall-clock ns, decimal):
  // each rank lowers it to its own abort time after its abort. A fault
  // detected before it is no abort's consequence.
  std::string firstAbort(int iteration) const { return ofIteration(iteration, "first-abort"); }
  // Present while `initialRank` is a spare in iteration k (its death then
  // interrupts nobody).
  std::string spare(int iteration, int initialRank) const;
  // The prefix under which iteration k's rendezvous keys live.
  std::string rendezvous(int iteration) const;

  std::string initialBarrier() const { return prefix_ + "initial"; }
  std::string iterationBarrier() const { return prefix_ + "iteration"; }
  std::string completionBarrier() const { return prefix_ + "completion"; }
  // The restart-storm decision after iteration k's fault: "go <back-off ms>"
  // or "stop <why>" (the first rank to propose one writes it).
  std::string stormDecision(int iteration) const { return ofIteration(iteration, "storm"); }
  // The one decision of iteration k's end: "complete" or "restart" (the first
  // rank to propose one writes it; every rank follows it).
  std::string completionDecision(int iteration) const {
    return ofIteration(iteration, "completion");
  }
  std::string terminationBarrier() const { return prefix_ + "termination"; }
  // The one verdict after iteration k's barrier (restart/loop/loop_recovery.cc,
  // Loop::decideRestart): its culprits, its terminated ranks, the joiners the
  // next World holds and the root fault record. Until it is written the key
  // holds the claim of the rank computing it ("claimed by <rank>"): the rank
  // writes its verdict by a compare-and-set from its own claim, which fails
  // on a store that restarted meanwhile. Every rank follows it.
  std::string verdict(int iteration) const { return ofIteration(iteration, "verdict"); }
  // Set once iteration k's verdict is written (or put back after a store
  // restart): what the ranks waiting for it wait on.
  std::string verdictReady(int iteration) const { return ofIteration(iteration, "verdict-ready"); }
  // Processes joining the running job (restart/loop/job/joiners.h).
  std::string joinerCount() const { return prefix_ + "joiners/count"; }
  std::string joinerAdmitted(int64_t number) const {
    return prefix_ + "joiners/" + std::to_string(number) + "/admitted";
  }
  std::string world(int iteration) const { return ofIteration(iteration, "world"); }
  std::string finished() const { return prefix_ + "finished"; }
  // The job's health comparison (restart/loop/job/health_exchange.h): active
  // rank r's latest sample in iteration k, and the reports found so far
  // (a counter, and one key per report numbered from 1).
  std::string healthSample(int iteration, int activeRank) const {
    return ofIteration(iteration, "health/" + std::to_string(activeRank));
  }
  std::string healthReportCount() const { return prefix_ + "health/reports"; }
  std::string healthReport(int64_t number) const {
    return prefix_ + "health/report/" + std::to_string(number);
  }

 private:
  // "iteration/<k>/<leaf>" under the job's prefix.
  std::string ofIteration(int iteration, const std::string& leaf) const {
    return prefix_ + "iteration/" + std::to_string(iteration) + "/" + leaf;
  }

  std::string jobId_;
  std::string prefix_;
};

}  // namespace resilient::restart::protocol
