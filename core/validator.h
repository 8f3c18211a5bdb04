#pragma once
/// The single authority on schedule legality (every generator's output and every loaded file
/// passes through it).
#include <string>

#include "core/dependency.h"
#include "core/schedule.h"

namespace pw {

/// Throws ConfigError with `source` as the file, naming the offending device and action, when
/// the placement is malformed, a (stage, microbatch) pass is missing or repeated, an action sits
/// on a device that does not hold its stage, or the order can deadlock.
void validate_schedule(const Schedule& schedule, const std::string& source = "");

/// As above, naming actions in messages through `locate` (e.g. a CSV file's line and cell).
void validate_schedule(const Schedule& schedule, const std::string& source,
                       const ActionLocator& locate);

/// As validate_schedule but returns the message ("" when valid) instead of throwing.
std::string check_schedule(const Schedule& schedule);

}  // namespace pw
