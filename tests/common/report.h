/*
 * report.h - the per-rank report of a fault test: "key=value" lines in
 * DIR/rank<R>, DIR named by an environment variable that the Python driver
 * sets (fault_job.py), R by mpirun (OMPI_COMM_WORLD_RANK). One write() per
 * line, so a rank killed at any moment leaves whole lines; fault_job.py's
 * read_reports keeps the first value of each key.
 *
 * Used by tests/runtime/faults/test_faults.c (TEST_FAULTS_DIR) and
 * tests/runtime/device/test_gpu_coll.c (TEST_GPU_DIR); link report.c
 * (test_report_src in tests/common/meson.build).
 */
#ifndef HORA_TEST_REPORT_H
#define HORA_TEST_REPORT_H

/* Before MPI starts: opens this rank's report and writes its pid. Exits 2,
 * saying "<program>: run me from <driver> (<dir_var> and mpirun)", where
 * dir_var or the rank is not set, or where the file cannot be written. */
void test_report_open(const char *program, const char *dir_var, const char *driver);

/* One "key=value" line (newlines in the value become spaces); nothing
 * before test_report_open. */
void test_report(const char *key, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Wall-clock seconds (CLOCK_REALTIME): what reports compare across ranks
 * and with the driver's time.time(). */
double test_now_real(void);

#endif
