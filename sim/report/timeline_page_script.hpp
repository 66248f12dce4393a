// The timeline page's script (timeline_page.js), embedded at build time.
#pragma once

namespace allocsim {

extern const char* const kTimelinePageScript;

}  // namespace allocsim
