#include "recorder/daemon/daemon.h"

int main(int argc, char** argv) { return flightrec::recorder::RecorderdMain(argc, argv); }
