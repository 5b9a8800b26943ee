# record_names_test: only recorder/record/ names the record's sections
# (check_record_names.cmake). The allow-list is what is left to move into
# record/'s typed readers and writers; it only shrinks: an entry that no
# longer matches fails the test too, so a fix removes its line. Some entries
# are the same word used as something else (the `crash core` command, the
# status JSON's off_cpu object): they go when the format's keys have typed
# accessors in record/ and the rest is spelled through them.
set(FLIGHTREC_RECORD_NAMES_ALLOWED
    coredump-hook/context.cc:metadata
    coredump-hook/context.cc:maps
    coredump-hook/coredump.cc:core
    coredump-hook/submit.cc:core
    coredump-hook/submit.cc:metadata
    coredump-hook/submit.cc:maps
    coredump-hook/submit.cc:backtrace
    fuzz/record_decode.cc:kallsyms
    recorder/analysis/crash_history.cc:off_cpu
    recorder/analysis/replay.cc:kSectionLiveAttribution
    recorder/analysis/replay.cc:kSectionEvents
    recorder/cli/coredump_install.cc:core
    recorder/cli/crash_commands.cc:core
    recorder/cli/crash_core.cc:kCrashSection
    recorder/cli/crash_info.cc:metadata
    recorder/cli/crash_info.cc:maps
    recorder/cli/crash_info.cc:backtrace
    recorder/cli/crash_info.cc:off_cpu
    recorder/cli/daemon_commands.cc:off_cpu
    recorder/cli/daemon_commands.cc:live_attribution
    recorder/cli/panic_info.cc:panic
    recorder/cli/panic_info.cc:kSectionPanic
    recorder/cli/report_commands.cc:loss
    recorder/cli/script_commands.cc:off_cpu
    recorder/daemon/daemon.cc:metadata
    recorder/daemon/daemon.cc:live_attribution
    recorder/daemon/death_record.cc:maps
    recorder/daemon/panic_record.cc:kSectionPanic
    recorder/fleet/crash_signature.cc:metadata
    recorder/fleet/crash_signature.cc:backtrace
    recorder/module/panic_ingest.cc:panic
    recorder/perf/perf_backend.cc:off_cpu)

add_test(NAME record_names_test
         COMMAND ${CMAKE_COMMAND} -DROOT=${PROJECT_SOURCE_DIR}
                 "-DALLOWED=${FLIGHTREC_RECORD_NAMES_ALLOWED}"
                 -P ${CMAKE_CURRENT_SOURCE_DIR}/check_record_names.cmake)
set_tests_properties(record_names_test PROPERTIES LABELS unit TIMEOUT 60)
