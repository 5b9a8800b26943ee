# record_names_test: only recorder/record/ names the record's sections
# (check_record_names.cmake). The allow-list is what is left to move into
# record/'s typed readers and writers; it only shrinks: an entry that no
# longer matches fails the test too, so a fix removes its line. Some entries
# are the same word used as something else (the `crash core` command, the
# status JSON's off_cpu object): they go when the format's keys have typed
# accessors in record/ and the rest is spelled through them.
set(FLIGHTREC_RECORD_NAMES_ALLOWED
    coredump-hook/context.cc:maps
    coredump-hook/context.cc:metadata
    coredump-hook/coredump.cc:core
    coredump-hook/submit.cc:backtrace
    coredump-hook/submit.cc:core
    coredump-hook/submit.cc:maps
    coredump-hook/submit.cc:metadata
    fuzz/record_decode.cc:kallsyms
    recorder/analysis/crash_history.cc:off_cpu
    recorder/analysis/replay.cc:kSectionEvents
    recorder/analysis/replay.cc:kSectionLiveAttribution
    recorder/cli/coredump_install.cc:core
    recorder/cli/crash_commands.cc:core
    recorder/cli/crash_core.cc:kCrashSection
    recorder/cli/crash_info.cc:backtrace
    recorder/cli/crash_info.cc:events
    recorder/cli/crash_info.cc:maps
    recorder/cli/crash_info.cc:metadata
    recorder/cli/crash_info.cc:off_cpu
    recorder/cli/crash_info.cc:oom
    recorder/cli/daemon_commands.cc:aux_trace
    recorder/cli/daemon_commands.cc:live_attribution
    recorder/cli/daemon_commands.cc:mem_growth
    recorder/cli/daemon_commands.cc:off_cpu
    recorder/cli/panic_info.cc:kSectionPanic
    recorder/cli/panic_info.cc:panic
    recorder/cli/report_commands.cc:loss
    recorder/cli/report_commands.cc:off_cpu
    recorder/cli/script_commands.cc:off_cpu
    recorder/cli/trace_command.cc:kSectionAuxTrace
    recorder/daemon/daemon.cc:aux_trace
    recorder/daemon/daemon.cc:kSectionAuxTrace
    recorder/daemon/daemon.cc:kSectionMemGrowth
    recorder/daemon/daemon.cc:kSectionOom
    recorder/daemon/daemon.cc:live_attribution
    recorder/daemon/daemon.cc:mem_growth
    recorder/daemon/daemon.cc:metadata
    recorder/daemon/daemon.cc:off_cpu
    recorder/daemon/daemon.cc:oom
    recorder/daemon/death_record.cc:maps
    recorder/daemon/oom_watch.cc:events
    recorder/daemon/oom_watch.cc:oom
    recorder/daemon/panic_record.cc:kSectionPanic
    recorder/export/pprof.cc:off_cpu
    recorder/fleet/crash_signature.cc:backtrace
    recorder/fleet/crash_signature.cc:metadata
    recorder/module/panic_ingest.cc:panic
    recorder/perf/aux_trace.cc:config
    recorder/perf/perf_backend.cc:off_cpu
    recorder/perf/perf_backend_off_cpu.cc:lock_waits)

add_test(NAME record_names_test
         COMMAND ${CMAKE_COMMAND} -DROOT=${PROJECT_SOURCE_DIR}
                 "-DALLOWED=${FLIGHTREC_RECORD_NAMES_ALLOWED}"
                 -P ${CMAKE_CURRENT_SOURCE_DIR}/check_record_names.cmake)
set_tests_properties(record_names_test PROPERTIES LABELS unit TIMEOUT 60)
