/* SPDX-License-Identifier: MIT */
/* weft — fi_info: list providers and the configurations fi_getinfo offers. */
/* strcasestr is a GNU extension: without this it was implicitly declared as
 * returning int, truncating the pointer it returns. */
#define _GNU_SOURCE
#include <rdma/fabric.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_ext.h>

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct name_value {
  const char *name;
  unsigned long long value;
};

#define NV(x) {#x, (unsigned long long)(x)}

static const struct name_value caps_names[] = {
    NV(FI_MSG),           NV(FI_RMA),         NV(FI_TAGGED),       NV(FI_ATOMIC),
    NV(FI_MULTICAST),     NV(FI_COLLECTIVE),  NV(FI_READ),         NV(FI_WRITE),
    NV(FI_RECV),          NV(FI_SEND),        NV(FI_REMOTE_READ),  NV(FI_REMOTE_WRITE),
    NV(FI_MULTI_RECV),    NV(FI_REMOTE_CQ_DATA), NV(FI_TRIGGER),   NV(FI_FENCE),
    NV(FI_LOCAL_COMM),    NV(FI_REMOTE_COMM), NV(FI_SHARED_AV),    NV(FI_RMA_EVENT),
    NV(FI_SOURCE),        NV(FI_NAMED_RX_CTX), NV(FI_DIRECTED_RECV), NV(FI_HMEM),
    NV(FI_VARIABLE_MSG),  NV(FI_SOURCE_ERR),  NV(FI_RMA_PMEM),     NV(FI_XPU),
    {NULL, 0}};

static const struct name_value mode_names[] = {
    NV(FI_CONTEXT), NV(FI_MSG_PREFIX), NV(FI_ASYNC_IOV), NV(FI_RX_CQ_DATA), NV(FI_LOCAL_MR),
    NV(FI_NOTIFY_FLAGS_ONLY), NV(FI_RESTRICTED_COMP), NV(FI_CONTEXT2), NV(FI_BUFFERED_RECV),
    {NULL, 0}};

static const struct name_value ep_names[] = {
    NV(FI_EP_UNSPEC), NV(FI_EP_MSG), NV(FI_EP_DGRAM), NV(FI_EP_RDM), {NULL, 0}};

static const struct name_value addr_names[] = {
    NV(FI_FORMAT_UNSPEC), NV(FI_SOCKADDR), NV(FI_SOCKADDR_IN), NV(FI_SOCKADDR_IN6),
    NV(FI_SOCKADDR_IB),   NV(FI_ADDR_PSMX), NV(FI_ADDR_GNI),   NV(FI_ADDR_BGQ),
    NV(FI_ADDR_MLX),      NV(FI_ADDR_STR),  NV(FI_ADDR_PSMX2), NV(FI_ADDR_IB_UD),
    NV(FI_ADDR_EFA),      {NULL, 0}};

/* "FI_MSG|FI_RMA" -> bits; exits on an unknown name. */
static unsigned long long parse_names(const char *arg, const struct name_value *table,
                                      int single) {
  unsigned long long bits = 0;
  char *copy = strdup(arg), *save = NULL;
  for (char *tok = strtok_r(copy, "|", &save); tok; tok = strtok_r(NULL, "|", &save)) {
    const struct name_value *nv;
    for (nv = table; nv->name; nv++)
      if (strcasecmp(tok, nv->name) == 0) break;
    if (!nv->name) {
      fprintf(stderr, "fi_info: unknown name %s\n", tok);
      exit(EXIT_FAILURE);
    }
    bits = single ? nv->value : bits | nv->value;
  }
  free(copy);
  return bits;
}

static void usage(void) {
  printf("Usage: fi_info\n"
         "  -h, --help\t\t\tdisplay this help and exit\n"
         "  -s, --src_addr=ADDR\t\tsource name or address\n"
         "  -n, --node=NAME\t\tdest node name or address\n"
         "  -P, --port=PNUM\t\tport number\n"
         "  -c, --caps=CAP1|CAP2..\tone or more capabilities: FI_MSG|FI_RMA...\n"
         "  -m, --mode=MOD1|MOD2..\tone or more modes, default all modes\n"
         "  -t, --ep_type=EPTYPE\t\tspecify single endpoint type: FI_EP_MSG, FI_EP_DGRAM...\n"
         "  -d, --domain=DOMAIN\t\tspecify the domain name\n"
         "  -f, --fabric=FABRIC\t\tspecify the fabric name\n"
         "  -a, --addr_format=FMT\t\tspecify accepted address format: FI_FORMAT_UNSPEC, "
         "FI_SOCKADDR...\n"
         "  -p, --provider=PROV\t\tspecify provider explicitly\n"
         "  -e, --env\t\t\tprint libfabric environment variables\n"
         "  -g, --getenv=SUBSTR\t\tprint libfabric environment variables with substr\n"
         "  -i, --info=\t\t\tprint fi_info structures containing substr\n"
         "  -l, --list\t\t\tlist available libfabric providers (and the data progress "
         "models each offers)\n"
         "  -v, --verbose\t\t\tverbose output\n"
         "  -x, --explain\t\t\tfor each provider that offers nothing, the first hint it "
         "rejected\n"
         "  --version\t\t\tprint version info and exit\n");
}

static int print_params(const char *substr) {
  struct fi_param *params = NULL;
  int count = 0, ret = fi_getparams(&params, &count);
  if (ret) {
    fprintf(stderr, "fi_getparams: %s\n", fi_strerror(-ret));
    return EXIT_FAILURE;
  }
  static const char *type_names[] = {"String", "Integer", "Boolean (0/1, on/off, true/false, yes/no)",
                                     "size_t"};
  for (int i = 0; i < count; i++) {
    if (substr && !strcasestr(params[i].name, substr)) continue;
    printf("# %s: %s\n# %s\n", params[i].name,
           params[i].type <= FI_PARAM_SIZE_T ? type_names[params[i].type] : "?",
           params[i].help_string);
    if (params[i].value) printf("%s=%s\n", params[i].name, params[i].value);
    printf("\n");
  }
  fi_freeparams(params);
  return EXIT_SUCCESS;
}

/* --explain: fi_getinfo logs, at FI_LOG_INFO, one line per provider that
 * passes over the hints, naming the first field it rejected. The tool
 * imports a logger (fi_import_log) that prints those lines as
 * "<provider>: <field>: <asked and offered>" on stdout; warnings still go
 * to stderr, everything else is left out. */
static const char rejects[] = " rejects the hints at ";
static const char nothing[] = " offers nothing for the hints ";

static int explain_enabled(const struct fi_provider *prov, enum fi_log_level level,
                           enum fi_log_subsys subsys, uint64_t flags) {
  (void)prov, (void)flags;
  return level == FI_LOG_WARN || (level == FI_LOG_INFO && subsys == FI_LOG_CORE);
}

static int explain_ready(const struct fi_provider *prov, enum fi_log_level level,
                         enum fi_log_subsys subsys, uint64_t flags, uint64_t *showtime) {
  (void)showtime;
  return explain_enabled(prov, level, subsys, flags);
}

static void explain_log(const struct fi_provider *prov, enum fi_log_level level,
                        enum fi_log_subsys subsys, const char *func, int line, const char *msg) {
  const char *name = prov && prov->name ? prov->name : "core";
  const char *at = strstr(msg, rejects);
  size_t len = strlen(msg);
  int nl = len && msg[len - 1] == '\n';
  (void)subsys, (void)func, (void)line;
  if (at)
    printf("%s: %s%s", name, at + sizeof rejects - 1, nl ? "" : "\n");
  else if (strstr(msg, nothing))
    printf("%s: no reason given %s%s", name, strstr(msg, nothing) + sizeof nothing - 1,
           nl ? "" : "\n");
  else if (level == FI_LOG_WARN)
    fprintf(stderr, "%s: %s%s", name, msg, nl ? "" : "\n");
}

static int start_explaining(void) {
  static struct fi_ops_log ops = {
      .size = sizeof(struct fi_ops_log),
      .enabled = explain_enabled,
      .ready = explain_ready,
      .log = explain_log,
  };
  static struct fid_logging logger = {.ops = &ops};
  int ret = fi_import_log(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), 0, &logger);
  if (ret) fprintf(stderr, "fi_info: --explain needs fi_import_log: %s\n", fi_strerror(-ret));
  return ret;
}

/* -l: the data progress models a provider offers, each one it answers hints
 * asking for it with (manual progress is every provider's default). */
static void print_progress(const char *prov) {
  static const enum fi_progress models[] = {FI_PROGRESS_MANUAL, FI_PROGRESS_AUTO};
  printf("    data progress:");
  for (size_t i = 0; i < sizeof models / sizeof models[0]; i++) {
    struct fi_info *hints = fi_allocinfo(), *got = NULL;
    if (!hints) break;
    hints->mode = ~0ULL;
    hints->domain_attr->mode = ~0ULL;
    hints->domain_attr->mr_mode = ~(FI_MR_BASIC | FI_MR_SCALABLE);
    hints->domain_attr->data_progress = models[i];
    hints->fabric_attr->prov_name = strdup(prov);
    if (fi_getinfo(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), NULL, NULL, 0, hints, &got) == 0)
      printf(" %s", fi_tostr(&models[i], FI_TYPE_PROGRESS));
    fi_freeinfo(got);
    fi_freeinfo(hints);
  }
  printf("\n");
}

static void print_short(const struct fi_info *info) {
  printf("provider: %s\n", info->fabric_attr->prov_name);
  printf("    fabric: %s\n", info->fabric_attr->name);
  printf("    domain: %s\n", info->domain_attr->name);
  printf("    version: %d.%d\n", FI_MAJOR(info->fabric_attr->prov_version),
         FI_MINOR(info->fabric_attr->prov_version));
  printf("    type: %s\n", fi_tostr(&info->ep_attr->type, FI_TYPE_EP_TYPE));
  printf("    protocol: %s\n", fi_tostr(&info->ep_attr->protocol, FI_TYPE_PROTOCOL));
}

int main(int argc, char **argv) {
  static const struct option longopts[] = {
      {"help", no_argument, NULL, 'h'},        {"src_addr", required_argument, NULL, 's'},
      {"node", required_argument, NULL, 'n'},  {"port", required_argument, NULL, 'P'},
      {"caps", required_argument, NULL, 'c'},  {"mode", required_argument, NULL, 'm'},
      {"ep_type", required_argument, NULL, 't'}, {"domain", required_argument, NULL, 'd'},
      {"fabric", required_argument, NULL, 'f'}, {"addr_format", required_argument, NULL, 'a'},
      {"provider", required_argument, NULL, 'p'}, {"env", no_argument, NULL, 'e'},
      {"getenv", required_argument, NULL, 'g'}, {"info", required_argument, NULL, 'i'},
      {"list", no_argument, NULL, 'l'},        {"verbose", no_argument, NULL, 'v'},
      {"version", no_argument, NULL, 'V'},     {"explain", no_argument, NULL, 'x'},
      {NULL, 0, NULL, 0}};
  struct fi_info *hints = fi_allocinfo();
  const char *node = NULL, *port = NULL, *filter = NULL;
  uint64_t flags = 0;
  int verbose = 0, explain = 0, opt;
  if (!hints) return EXIT_FAILURE;
  hints->mode = ~0ULL;
  hints->domain_attr->mode = ~0ULL;
  hints->domain_attr->mr_mode = ~(FI_MR_BASIC | FI_MR_SCALABLE);

  while ((opt = getopt_long(argc, argv, "s:n:P:c:m:t:d:f:a:p:eg:i:lvxh", longopts, NULL)) != -1) {
    switch (opt) {
      case 's': node = optarg; flags |= FI_SOURCE; break;
      case 'n': node = optarg; break;
      case 'P': port = optarg; break;
      case 'c': hints->caps = parse_names(optarg, caps_names, 0); break;
      case 'm': hints->mode = parse_names(optarg, mode_names, 0); break;
      case 't': hints->ep_attr->type = (enum fi_ep_type)parse_names(optarg, ep_names, 1); break;
      case 'd': hints->domain_attr->name = strdup(optarg); break;
      case 'f': hints->fabric_attr->name = strdup(optarg); break;
      case 'a': hints->addr_format = (uint32_t)parse_names(optarg, addr_names, 1); break;
      case 'p': hints->fabric_attr->prov_name = strdup(optarg); break;
      case 'e': fi_freeinfo(hints); return print_params(NULL);
      case 'g': fi_freeinfo(hints); return print_params(optarg);
      case 'i': filter = optarg; verbose = 1; break;
      case 'l': flags |= FI_PROV_ATTR_ONLY; break;
      case 'v': verbose = 1; break;
      case 'x': explain = 1; break;
      case 'V':
        printf("fi_info: weft %s\n", WEFT_VERSION);
        printf("libfabric: %s\n", fi_tostr("", FI_TYPE_VERSION));
        printf("libfabric api: %d.%d\n", FI_MAJOR(fi_version()), FI_MINOR(fi_version()));
        fi_freeinfo(hints);
        return EXIT_SUCCESS;
      case 'h': usage(); fi_freeinfo(hints); return EXIT_SUCCESS;
      default: usage(); fi_freeinfo(hints); return EXIT_FAILURE;
    }
  }

  if (explain && start_explaining()) {
    fi_freeinfo(hints);
    return EXIT_FAILURE;
  }
  struct fi_info *info = NULL;
  int ret = fi_getinfo(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), node, port, flags,
                       hints, &info);
  fi_freeinfo(hints);
  if (ret) {
    fprintf(stderr, "fi_getinfo: %d (%s)\n", ret, fi_strerror(-ret));
    return EXIT_FAILURE;
  }
  for (struct fi_info *i = info; i; i = i->next) {
    if (flags & FI_PROV_ATTR_ONLY) {
      printf("%s:\n    version: %d.%d\n", i->fabric_attr->prov_name,
             FI_MAJOR(i->fabric_attr->prov_version), FI_MINOR(i->fabric_attr->prov_version));
      print_progress(i->fabric_attr->prov_name);
    } else if (verbose) {
      const char *text = fi_tostr(i, FI_TYPE_INFO);
      if (filter && !strcasestr(text, filter)) continue;
      printf("---\n%s", text);
    } else {
      print_short(i);
    }
  }
  fi_freeinfo(info);
  return EXIT_SUCCESS;
}
