// recorder --fleet CONFIG ...: fleet queries (fleet_commands.cc).
#pragma once

namespace flightrec::recorder::cli {

// argv has --fleet (before any "--"): RecorderMain hands it to FleetMain.
bool WantsFleet(int argc, char** argv);
int FleetMain(int argc, char** argv);

}  // namespace flightrec::recorder::cli
