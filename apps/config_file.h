// `--config FILE`: a run configuration whose keys are a command's flag names (without "--"), in YAML (.yaml,
// .yml) or JSON. A switch takes true or false, a repeatable flag a list (or one value), any other flag a
// scalar; null leaves a flag unset. `positional_key` (e.g. "tasks") holds the positional argument. The
// command line wins: a flag given there replaces the file's value (for a repeatable flag, its whole list). A
// results folder's config.json (a run record: {"config": {...}, "surf_version": ...}) is read as its "config"
// object.
#pragma once

#include <string>
#include <vector>

#include "apps/cli.h"

namespace surf::cli {

// `args` with the file's values under them. Unknown keys, "config" itself and values of the wrong kind are
// errors (kConfig) naming the file, the key's line and the key, with a did-you-mean for a near key.
Args apply_config_file(const Args& args, const std::string& path, const std::vector<FlagSpec>& specs,
                       const std::string& positional_key);

}  // namespace surf::cli
