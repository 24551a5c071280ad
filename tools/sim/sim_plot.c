/*
 * sim_plot.c - PNG line plots through gnuplot (pngcairo), data
 * inline. Without gnuplot, a note and no plot: the tables are the result.
 */
#include <stdio.h>
#include <stdlib.h>

#include "sim_report.h"

static int plot_have_gnuplot(void) { return system("command -v gnuplot > /dev/null 2>&1") == 0; }

int sim_plot(const char *dir, const char *file, const char *title, const char *xlabel, const char *ylabel, int logx,
             const struct sim_series *series, int count)
{
    static int warned;
    if (!plot_have_gnuplot()) {
        if (!warned) fprintf(stderr, "hora-sim: gnuplot not found: no plots (install gnuplot-nox)\n");
        warned = 1;
        return 0;
    }
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", dir, file);
    FILE *g = popen("gnuplot", "w");
    if (!g) {
        fprintf(stderr, "hora-sim: cannot run gnuplot for %s\n", path);
        return -1;
    }
    fprintf(g, "set terminal pngcairo size 900,560 noenhanced\n");
    fprintf(g, "set output '%s'\nset title '%s'\nset xlabel '%s'\nset ylabel '%s'\nset grid\nset key outside right\n",
            path, title, xlabel, ylabel);
    if (logx) fprintf(g, "set logscale x 2\n");
    for (int s = 0; s < count; s++) {
        fprintf(g, "$d%d << EOD\n", s);
        for (int i = 0; i < series[s].count; i++) fprintf(g, "%.9g %.9g\n", series[s].x[i], series[s].y[i]);
        fprintf(g, "EOD\n");
    }
    fprintf(g, "plot ");
    for (int s = 0; s < count; s++)
        fprintf(g, "%s$d%d with linespoints lw 2 title '%s'", s ? ", " : "", s, series[s].title);
    fprintf(g, "\n");
    if (pclose(g) != 0) {
        fprintf(stderr, "hora-sim: gnuplot failed on %s\n", path);
        return -1;
    }
    printf("# plot: %s\n", path);
    return 0;
}
