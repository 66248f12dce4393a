// The shipped table of device call times (device_call_times_h100.json), embedded at build time.
#pragma once

namespace allocsim {

extern const char* const kShippedDeviceCallTimes;

}  // namespace allocsim
