/* node_bus_factors.cpp: preloaded into smpirun by simulate.sh.
 *
 * StarPU times the transfers inside a node (host <-> GPU, GPU <-> GPU) on
 * links whose latency and bandwidth it measured end to end, and its platform
 * files ask SimGrid to take them as they are (network/latency-factor and
 * network/bandwidth-factor 1, network/TCP-gamma -1). starpu_smpirun drops
 * those settings when it merges the nodes into one SMPI platform, so each
 * transfer inside a node took SMPI's factors, fitted to MPI over Ethernet
 * (latency x 11.6 from 64 KB up: 8 us measured became 93 us). This library
 * gives SimGrid a factor for each communication: 1 where both ends are hosts
 * of one node (StarPU-MPI<i>-RAM, -CUDA<j>, ...), SMPI's own size-based
 * factors (smpi/lat-factor, smpi/bw-factor) for the messages between nodes. */
#include <simgrid/kernel/resource/NetworkModelIntf.hpp>
#include <simgrid/s4u/Engine.hpp>
#include <simgrid/s4u/Host.hpp>
#include <simgrid/s4u/NetZone.hpp>
#include <xbt/config.hpp>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace {

using Factors = std::vector<std::pair<double, double>>; /* (size threshold, factor above it) */

/* SMPI's "size:factor;size:factor" list, sorted by size */
Factors parse_factors(const std::string& text)
{
    Factors out;
    std::istringstream in(text);
    std::string item;
    while (std::getline(in, item, ';')) {
        size_t colon = item.find(':');
        if (colon == std::string::npos)
            continue;
        out.emplace_back(std::stod(item.substr(0, colon)), std::stod(item.substr(colon + 1)));
    }
    std::sort(out.begin(), out.end());
    return out;
}

/* as SMPI reads its list: the factor of the largest threshold below size */
double factor_for(const Factors& f, double size)
{
    double current = 1.0;
    for (const auto& [threshold, factor] : f) {
        if (size <= threshold)
            break;
        current = factor;
    }
    return current;
}

bool inside_one_node(const simgrid::s4u::Host* src, const simgrid::s4u::Host* dst)
{
    const simgrid::s4u::NetZone* zone = src->get_englobing_zone();
    return zone == dst->get_englobing_zone() && zone->get_name().rfind("StarPU-MPI", 0) == 0;
}

void collect_models(const simgrid::s4u::NetZone* zone, std::set<simgrid::kernel::resource::NetworkModelIntf*>& models)
{
    if (auto* model = zone->get_network_model())
        models.insert(model);
    for (const simgrid::s4u::NetZone* child : zone->get_children())
        collect_models(child, models);
}

using FactorCb = std::function<simgrid::kernel::resource::NetworkModelIntf::NetworkFactorCb>;

/* 1 inside a node, else SMPI's factor (the list of config key) for the size */
FactorCb node_or_smpi(const char* key)
{
    Factors smpi = parse_factors(simgrid::config::get_value<std::string>(key));
    return [smpi](double size, const simgrid::s4u::Host* src, const simgrid::s4u::Host* dst,
                  const std::vector<simgrid::s4u::Link*>&, const std::unordered_set<simgrid::s4u::NetZone*>&) {
        return inside_one_node(src, dst) ? 1.0 : factor_for(smpi, size);
    };
}

/* A run given its own smpi/lat-factor or smpi/bw-factor (--cfg) keeps it
 * for every communication: SimGrid takes either those or a callback. */
void install_factors()
{
    bool own_lat = !simgrid::config::is_default("smpi/lat-factor");
    bool own_bw = !simgrid::config::is_default("smpi/bw-factor");
    if (own_lat || own_bw)
        std::fprintf(stderr, "node_bus_factors: smpi/%s given: it applies inside the nodes too\n",
                     own_lat && own_bw ? "lat-factor and bw-factor" : own_lat ? "lat-factor" : "bw-factor");
    std::set<simgrid::kernel::resource::NetworkModelIntf*> models;
    collect_models(simgrid::s4u::Engine::get_instance()->get_netzone_root(), models);
    for (auto* model : models) {
        if (!own_lat)
            model->set_lat_factor_cb(node_or_smpi("smpi/lat-factor"));
        if (!own_bw)
            model->set_bw_factor_cb(node_or_smpi("smpi/bw-factor"));
    }
}

struct Register {
    Register() { simgrid::s4u::Engine::on_platform_created_cb(install_factors); }
} register_at_load;

} // namespace
