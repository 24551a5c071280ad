/* stack_capture.c - the stack of this process's application thread, as text,
 * taken from another thread (stack.h explains what asks for it).
 *
 * With a provider (hora_set_stack_provider; hora.torch registers one that
 * formats the Python stack of the main thread) the text is the provider's.
 * Otherwise a native backtrace of the thread that last submitted a request,
 * or of the one that called hora_init:
 *  1. the helper thread arms the capture (target tid, state ARMED) and sends
 *     STACK_CAPTURE_SIGNAL to that thread alone (tgkill);
 *  2. the handler, on that thread, checks that the capture is armed for it
 *     (compare-and-swap ARMED -> RUNNING), records the interrupted program
 *     counter and backtrace()'s return addresses into static arrays, and
 *     stores DONE with release; errno is kept. backtrace() is not on POSIX's
 *     list of async-signal-safe functions: its only unsafe step is loading
 *     libgcc's unwinder on first use, so the helper calls it once before
 *     the first signal;
 *  3. the helper waits up to STACK_CAPTURE_WAIT_S for DONE (a thread that
 *     blocks the signal, or sleeps uninterruptibly, never takes it: the
 *     capture is disarmed with a compare-and-swap, and a late signal finds
 *     nothing armed), then names the frames with dladdr, from the
 *     interrupted instruction on (the handler's own frames are left out).
 * The handler is installed at the first capture, only when the signal has
 * its default action (a program that uses it keeps it, and gets no native
 * stack), and stays installed: a signal still pending when it was removed
 * would kill the process. A sleep the signal interrupts (nanosleep, poll)
 * returns early with EINTR, as for any signal with a handler.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <execinfo.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "coord/stack.h"

#define STACK_CAPTURE_FRAMES 48
#define STACK_CAPTURE_WAIT_S 1.0
/* A real-time signal: nothing in libc, Open MPI or UCX sends it. */
#define STACK_CAPTURE_SIGNAL (SIGRTMIN + 7)

enum { STACK_CAPTURE_IDLE = 0, STACK_CAPTURE_ARMED = 1, STACK_CAPTURE_RUNNING = 2, STACK_CAPTURE_DONE = 3 };
/* The helper's job: none, asked for, being taken, text ready. */
enum { STACK_JOB_NONE = 0, STACK_JOB_ASKED = 1, STACK_JOB_BUSY = 2, STACK_JOB_READY = 3 };

static struct {
    /* Threads: the last to submit, the one that called hora_init (tids). */
    _Atomic int submit_tid, init_tid;
    /* The signal's handshake (the handler touches only these). */
    _Atomic int state;
    _Atomic int target_tid;
    void *frames[STACK_CAPTURE_FRAMES];
    int frame_count;
    void *pc;          /* the interrupted instruction, NULL where unknown */
    int handler_state; /* 0 not tried, 1 installed, -1 the program uses the signal */

    /* The helper thread and its job, under lock. */
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int helper_started;
    int job;
    char text[STACK_TEXT_BYTES];
    hora_stack_provider_t provider;
    void *provider_arg;
} stack_capture = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};

static int stack_capture_gettid(void) { return (int)syscall(SYS_gettid); }

static int stack_capture_my_tid(void)
{
    static __thread int tid;
    if (!tid) tid = stack_capture_gettid();
    return tid;
}

void stack_capture_note_submit(void)
{
    atomic_store_explicit(&stack_capture.submit_tid, stack_capture_my_tid(), memory_order_relaxed);
}

void stack_capture_note_init(void)
{
    atomic_store_explicit(&stack_capture.init_tid, stack_capture_my_tid(), memory_order_relaxed);
}

void stack_capture_set_provider(hora_stack_provider_t provider, void *arg)
{
    pthread_mutex_lock(&stack_capture.lock);
    stack_capture.provider = provider;
    stack_capture.provider_arg = arg;
    pthread_mutex_unlock(&stack_capture.lock);
}

/* Async-signal-safe: atomics, gettid, backtrace (libgcc already loaded). */
static void stack_capture_handler(int sig, siginfo_t *info, void *ucontext)
{
    (void)sig;
    const int saved_errno = errno;
    int armed = STACK_CAPTURE_ARMED;
    if (info->si_code == SI_TKILL && info->si_pid == getpid() &&
        atomic_load_explicit(&stack_capture.target_tid, memory_order_acquire) == stack_capture_gettid() &&
        atomic_compare_exchange_strong_explicit(&stack_capture.state, &armed, STACK_CAPTURE_RUNNING,
                                                memory_order_acq_rel, memory_order_relaxed)) {
        const ucontext_t *uc = ucontext;
        (void)uc;
#if defined(__x86_64__)
        stack_capture.pc = (void *)uc->uc_mcontext.gregs[REG_RIP];
#elif defined(__aarch64__)
        stack_capture.pc = (void *)uc->uc_mcontext.pc;
#else
        stack_capture.pc = NULL;
#endif
        stack_capture.frame_count = backtrace(stack_capture.frames, STACK_CAPTURE_FRAMES);
        atomic_store_explicit(&stack_capture.state, STACK_CAPTURE_DONE, memory_order_release);
    }
    errno = saved_errno;
}

/* Once: load the unwinder, install the handler where the signal is free. */
static int stack_capture_prepare(void)
{
    if (stack_capture.handler_state) return stack_capture.handler_state > 0;
    void *warm[2];
    backtrace(warm, 2);
    struct sigaction old, sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = stack_capture_handler;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (sigaction(STACK_CAPTURE_SIGNAL, NULL, &old) == 0 && !(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_DFL &&
        sigaction(STACK_CAPTURE_SIGNAL, &sa, NULL) == 0)
        stack_capture.handler_state = 1;
    else
        stack_capture.handler_state = -1;
    return stack_capture.handler_state > 0;
}

static double stack_capture_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Append one formatted line; the text is cut (with a mark) when full. */
static size_t stack_capture_append(char *text, size_t cap, size_t used, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static size_t stack_capture_append(char *text, size_t cap, size_t used, const char *fmt, ...)
{
    if (used + 1 >= cap) return used;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(text + used, cap - used, fmt, ap);
    va_end(ap);
    if (n < 0) return used;
    if ((size_t)n >= cap - used) {
        static const char cut[] = "...(cut)\n";
        if (cap > sizeof(cut)) memcpy(text + cap - sizeof(cut), cut, sizeof(cut));
        return cap - 1;
    }
    return used + (size_t)n;
}

/* The native backtrace of the application thread. */
static void stack_capture_native(char *text, size_t cap)
{
    int tid = atomic_load_explicit(&stack_capture.submit_tid, memory_order_relaxed);
    const char *which = "the last to submit a request";
    if (!tid) {
        tid = atomic_load_explicit(&stack_capture.init_tid, memory_order_relaxed);
        which = "the one that called hora_init";
    }
    if (!tid) {
        snprintf(text, cap, "(no application thread known: none has called hora_init or submitted)\n");
        return;
    }
    if (!stack_capture_prepare()) {
        snprintf(text, cap, "(no native backtrace: the program handles signal SIGRTMIN+%d itself)\n",
                 STACK_CAPTURE_SIGNAL - SIGRTMIN);
        return;
    }
    atomic_store_explicit(&stack_capture.target_tid, tid, memory_order_relaxed);
    atomic_store_explicit(&stack_capture.state, STACK_CAPTURE_ARMED, memory_order_release);
    if (syscall(SYS_tgkill, getpid(), tid, STACK_CAPTURE_SIGNAL) != 0) {
        const int err = errno;
        atomic_store_explicit(&stack_capture.state, STACK_CAPTURE_IDLE, memory_order_relaxed);
        snprintf(text, cap, "(thread %d, %s, cannot be signalled: %s)\n", tid, which, strerror(err));
        return;
    }
    const double deadline = stack_capture_now_s() + STACK_CAPTURE_WAIT_S;
    for (;;) {
        int state = atomic_load_explicit(&stack_capture.state, memory_order_acquire);
        if (state == STACK_CAPTURE_DONE) break;
        if (state == STACK_CAPTURE_ARMED && stack_capture_now_s() > deadline) {
            int armed = STACK_CAPTURE_ARMED;
            if (atomic_compare_exchange_strong_explicit(&stack_capture.state, &armed, STACK_CAPTURE_IDLE,
                                                        memory_order_acq_rel, memory_order_acquire)) {
                snprintf(text, cap, "(thread %d, %s, did not take the signal within %.0f s: it blocks it)\n", tid,
                         which, STACK_CAPTURE_WAIT_S);
                return;
            }
            continue; /* the handler started just now: it ends in microseconds */
        }
        struct timespec nap = {0, 1000 * 1000};
        nanosleep(&nap, NULL);
    }
    /* DONE: the handler's stores are visible (acquire above). */
    int first = 1;
    for (int i = 0; i < stack_capture.frame_count; i++)
        if (stack_capture.frames[i] == stack_capture.pc) {
            first = i;
            break;
        }
    size_t used = stack_capture_append(text, cap, 0, "native backtrace of thread %d (%s):\n", tid, which);
    for (int i = first, k = 0; i < stack_capture.frame_count; i++, k++) {
        void *addr = stack_capture.frames[i];
        Dl_info info;
        if (dladdr(addr, &info) && info.dli_sname && info.dli_saddr)
            used = stack_capture_append(text, cap, used, "#%d %s+0x%lx in %s\n", k, info.dli_sname,
                                        (unsigned long)((char *)addr - (char *)info.dli_saddr),
                                        info.dli_fname ? info.dli_fname : "?");
        else if (dladdr(addr, &info) && info.dli_fname)
            used = stack_capture_append(text, cap, used, "#%d %s+0x%lx\n", k, info.dli_fname,
                                        (unsigned long)((char *)addr - (char *)info.dli_fbase));
        else
            used = stack_capture_append(text, cap, used, "#%d %p\n", k, addr);
    }
    atomic_store_explicit(&stack_capture.state, STACK_CAPTURE_IDLE, memory_order_relaxed);
}

void stack_capture_now(char *text, size_t cap)
{
    pthread_mutex_lock(&stack_capture.lock);
    hora_stack_provider_t provider = stack_capture.provider;
    void *arg = stack_capture.provider_arg;
    pthread_mutex_unlock(&stack_capture.lock);
    text[0] = '\0';
    if (provider) {
        size_t n = provider(text, cap, arg);
        text[n < cap ? n : cap - 1] = '\0';
        if (!text[0]) snprintf(text, cap, "(the stack provider returned nothing)\n");
        return;
    }
    stack_capture_native(text, cap);
}

/* The helper: one capture at a time, outside the lock (a provider may wait
 * for the GIL as long as it likes; the coordinator does not). Detached and
 * never ended: its state is static. */
static void *stack_capture_helper(void *arg)
{
    (void)arg;
    char *text = stack_capture.text;
    pthread_mutex_lock(&stack_capture.lock);
    for (;;) {
        while (stack_capture.job != STACK_JOB_ASKED) pthread_cond_wait(&stack_capture.cond, &stack_capture.lock);
        stack_capture.job = STACK_JOB_BUSY;
        pthread_mutex_unlock(&stack_capture.lock);
        stack_capture_now(text, sizeof(stack_capture.text));
        pthread_mutex_lock(&stack_capture.lock);
        stack_capture.job = STACK_JOB_READY;
    }
    return NULL;
}

int stack_capture_start(void)
{
    int started = 0;
    pthread_mutex_lock(&stack_capture.lock);
    if (!stack_capture.helper_started) {
        pthread_t thread;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        /* The helper must not take the capture signal itself. */
        sigset_t block, old;
        sigemptyset(&block);
        sigaddset(&block, STACK_CAPTURE_SIGNAL);
        pthread_sigmask(SIG_BLOCK, &block, &old);
        if (pthread_create(&thread, &attr, stack_capture_helper, NULL) == 0) stack_capture.helper_started = 1;
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        pthread_attr_destroy(&attr);
    }
    /* A result nobody took (its channel closed) is stale. */
    if (stack_capture.helper_started && (stack_capture.job == STACK_JOB_NONE || stack_capture.job == STACK_JOB_READY)) {
        stack_capture.job = STACK_JOB_ASKED;
        pthread_cond_signal(&stack_capture.cond);
        started = 1;
    }
    pthread_mutex_unlock(&stack_capture.lock);
    return started;
}

int stack_capture_take(char *text, size_t cap)
{
    int ready = 0;
    pthread_mutex_lock(&stack_capture.lock);
    if (stack_capture.job == STACK_JOB_READY) {
        snprintf(text, cap, "%s", stack_capture.text);
        stack_capture.job = STACK_JOB_NONE;
        ready = 1;
    }
    pthread_mutex_unlock(&stack_capture.lock);
    return ready;
}
