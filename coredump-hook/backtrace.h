// The walkers behind a crash's backtrace, run inside the sandboxed child:
// libunwind's coredump accessors, a frame-pointer walk and elfutils' dwfl,
// frames symbolized with the attribution pipeline. Declared in coredump.h
// (Backtrace).
#pragma once

#include "coredump-hook/coredump.h"
