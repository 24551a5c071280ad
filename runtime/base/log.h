/* log.h - rank-prefixed logging to stderr, level from HORA_LOG_LEVEL. */
#ifndef HORA_LOG_H
#define HORA_LOG_H

enum log_level { LOG_LEVEL_ERROR = 0, LOG_LEVEL_WARN = 1, LOG_LEVEL_INFO = 2, LOG_LEVEL_DEBUG = 3 };

void log_set_level(int level);
void log_set_rank(int rank);
int log_enabled(int level);
void log_msg(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A header line, prefixed as log_msg's, then each line of body indented by
 * four spaces (any length, one write): a stack, a table. */
void log_block(int level, const char *header, const char *body);

#define log_error(...) log_msg(LOG_LEVEL_ERROR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_LEVEL_WARN, __VA_ARGS__)
#define log_info(...) log_msg(LOG_LEVEL_INFO, __VA_ARGS__)
#define log_debug(...)                                                           \
    do {                                                                         \
        if (log_enabled(LOG_LEVEL_DEBUG)) log_msg(LOG_LEVEL_DEBUG, __VA_ARGS__); \
    } while (0)

#endif
