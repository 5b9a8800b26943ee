#include "recorder/cli/cli.h"

int main(int argc, char** argv) { return flightrec::recorder::cli::RecorderMain(argc, argv); }
