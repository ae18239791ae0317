// Prints Stockfish's own SFNNv16 feature lists (nnue-forge test harness, built against a Stockfish source
// tree by scripts/build_sf_features.sh): for each FEN on stdin, "white ... | black ..." (Full_Threats, then
// PP_3Wide from 59808, then HalfKAv2_hm from 64368), from FullThreats/PP_3Wide::append_active_indices and
// HalfKAv2_hm::make_index. An argument (any) reads the FENs as Chess960.
#include <iostream>
#include <string>
#include "attacks.h"
#include "bitboard.h"
#include "position.h"
#include "nnue/features/full_threats.h"
#include "nnue/features/pp_3wide.h"
#include "nnue/features/half_ka_v2_hm.h"
using namespace Stockfish;
using namespace Stockfish::Eval::NNUE::Features;
int main(int argc, char** argv) {
    Attacks::init();
    Position::init();
    bool c960 = argc > 1;
    std::string fen;
    while (std::getline(std::cin, fen)) {
        if (fen.empty()) continue;
        StateInfo si;
        Position pos;
        auto err = pos.set(fen, c960, &si);
        if (err) { std::cout << "error\n"; continue; }
        for (Color c : {WHITE, BLACK}) {
            FullThreats::IndexList l;
            FullThreats::append_active_indices(c, pos, l);
            PP_3Wide::append_active_indices(c, pos, l);
            if (c == BLACK) std::cout << " |";
            for (auto i : l) std::cout << " " << i;
            Square ksq = pos.square<KING>(c);
            Bitboard b = pos.pieces();
            while (b) { Square s = pop_lsb(b); std::cout << " " << 64368 + HalfKAv2_hm::make_index(c, s, pos.piece_on(s), ksq); }
        }
        std::cout << "\n";
    }
}
