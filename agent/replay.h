// A run's replay: replay.webm in the trace folder, one frame a step (its screenshot, shown for a second and a
// half) with the action drawn on it: the click as a red dot and ring, a drag's path, the policy's own point
// as a blue ring, and a caption bar with the step's number and action (typed text included). The last frame
// shows the answer. Written with OpenCV's videoio as VP8 in WebM, which browsers play; builds without
// OpenCV's videoio write none.
#pragma once

#include <string>
#include <vector>

#include "agent/trace.h"

namespace surf::agent {

// Whether this build writes replays.
bool replay_available();

// Writes `path` from `steps`, whose screenshots are relative to `dir`. Returns false, writing nothing, when
// the build has no video support or no step has a screenshot. Throws Error(kIo) naming `path` when the writer
// cannot open it, and Error(kFormat) naming a screenshot that does not decode.
bool write_replay(const std::string& dir, const std::vector<TraceStep>& steps, const std::string& answer,
                  const std::string& path);

}  // namespace surf::agent
