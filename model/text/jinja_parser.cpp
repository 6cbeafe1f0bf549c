// Jinja parser: tokens → statement tree, with jinja2's operator precedence
// (condition < or < and < not < compare < + - < ~ < * / // % < ** < unary < postfix < filter/test).
#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "model/text/jinja_ast.h"

namespace surf::model::jinja {

namespace {

class Parser {
public:
    explicit Parser(const std::vector<Token>& tokens) : tokens_(tokens) {}

    Body parse_template() {
        std::string found;
        return parse_until({}, &found, nullptr);
    }

private:
    // Bounds the recursion of the descent parser so a pathological template fails instead of
    // overflowing the stack.
    struct DepthGuard {
        static constexpr int kMaxDepth = 1000;
        explicit DepthGuard(Parser& p) : parser(p) {
            if (++parser.depth_ > kMaxDepth) parser.fail("template nested too deeply");
        }
        ~DepthGuard() { --parser.depth_; }
        Parser& parser;
    };

    struct OpenBlock {
        std::string name;
        int line;
    };

    const Token& peek(size_t ahead = 0) const { return tokens_[std::min(pos_ + ahead, tokens_.size() - 1)]; }
    const Token& next() {
        const Token& t = tokens_[pos_];
        if (pos_ + 1 < tokens_.size()) ++pos_;
        return t;
    }
    bool is_op(const char* op, size_t ahead = 0) const {
        return peek(ahead).type == TokenType::kOp && peek(ahead).text == op;
    }
    bool is_name(const char* name, size_t ahead = 0) const {
        return peek(ahead).type == TokenType::kName && peek(ahead).text == name;
    }
    bool accept_op(const char* op) {
        if (!is_op(op)) return false;
        next();
        return true;
    }
    bool accept_name(const char* name) {
        if (!is_name(name)) return false;
        next();
        return true;
    }

    static std::string describe(const Token& t) {
        switch (t.type) {
            case TokenType::kData: return "template data";
            case TokenType::kVarBegin: return "'{{'";
            case TokenType::kVarEnd: return "'}}'";
            case TokenType::kBlockBegin: return "'{%'";
            case TokenType::kBlockEnd: return "'%}'";
            case TokenType::kString: return "string literal";
            case TokenType::kEof: return "end of template";
            default: return "'" + t.text + "'";
        }
    }

    [[noreturn]] void fail(const std::string& message, int line = 0) const {
        throw TemplateError(message, line ? line : peek().line);
    }

    void expect_op(const char* op) {
        if (!accept_op(op)) fail(std::string("expected '") + op + "', got " + describe(peek()));
    }
    std::string expect_name() {
        if (peek().type != TokenType::kName) fail("expected a name, got " + describe(peek()));
        return next().text;
    }
    void expect_block_end() {
        if (peek().type != TokenType::kBlockEnd)
            fail("expected end of statement '%}', got " + describe(peek()));
        next();
    }

    static ExprPtr make(ExprKind kind, int line) {
        auto e = std::make_unique<Expr>();
        e->kind = kind;
        e->line = line;
        return e;
    }

    // Parses nodes until a block tag named in `enders`; consumes `{%` and the tag name and stores it
    // in *found. With no enders, parses to the end of the template.
    Body parse_until(const std::vector<std::string>& enders, std::string* found, const OpenBlock* open) {
        Body body;
        while (true) {
            const Token& t = peek();
            if (t.type == TokenType::kEof) {
                if (enders.empty()) return body;
                std::string expected;
                for (size_t i = 0; i < enders.size(); ++i) expected += (i ? " or '" : "'") + enders[i] + "'";
                fail("unexpected end of template: looking for " + expected + " to close '" + open->name +
                         "' opened on line " + std::to_string(open->line),
                     t.line);
            }
            if (t.type == TokenType::kData) {
                auto node = std::make_unique<Node>();
                node->kind = NodeKind::kText;
                node->line = t.line;
                node->text = t.text;
                body.push_back(std::move(node));
                next();
            } else if (t.type == TokenType::kVarBegin) {
                auto node = std::make_unique<Node>();
                node->kind = NodeKind::kOutput;
                node->line = t.line;
                next();
                node->expr = parse_tuple(true);
                if (peek().type != TokenType::kVarEnd)
                    fail("expected end of print statement '}}', got " + describe(peek()));
                next();
                body.push_back(std::move(node));
            } else if (t.type == TokenType::kBlockBegin) {
                const Token& tag = peek(1);
                if (tag.type == TokenType::kName) {
                    for (const std::string& e : enders) {
                        if (tag.text == e) {
                            next();
                            next();
                            *found = e;
                            return body;
                        }
                    }
                }
                body.push_back(parse_statement());
            } else {
                fail("unexpected " + describe(t));
            }
        }
    }

    std::unique_ptr<Node> parse_statement() {
        DepthGuard guard(*this);
        int line = next().line;  // {%
        if (peek().type != TokenType::kName) fail("expected a statement name, got " + describe(peek()));
        std::string tag = next().text;
        auto node = std::make_unique<Node>();
        node->line = line;
        OpenBlock open{tag, line};
        std::string found;
        if (tag == "if") {
            parse_if(*node, open);
        } else if (tag == "for") {
            parse_for(*node, open);
        } else if (tag == "set") {
            parse_set(*node, open);
        } else if (tag == "macro") {
            parse_macro(*node, open);
        } else if (tag == "break" || tag == "continue") {
            node->kind = tag == "break" ? NodeKind::kBreak : NodeKind::kContinue;
        } else if (tag == "generation") {
            node->kind = NodeKind::kScope;
            expect_block_end();
            node->body = parse_until({"endgeneration"}, &found, &open);
        } else {
            static const char* kUnsupported[] = {"include", "import", "from", "extends",    "block",
                                                 "call",    "filter", "with", "autoescape", "do"};
            for (const char* name : kUnsupported) {
                if (tag == name) fail("unsupported tag '" + tag + "'", line);
            }
            fail("unknown tag '" + tag + "'", line);
        }
        expect_block_end();
        return node;
    }

    // `if cond %}...{% elif cond %}...{% else %}...{% endif`, up to the final `%}`.
    void parse_if(Node& node, const OpenBlock& open) {
        std::string found;
        node.kind = NodeKind::kIf;
        ExprPtr condition = parse_tuple(false);
        while (true) {
            expect_block_end();
            Body body = parse_until({"elif", "else", "endif"}, &found, &open);
            node.branches.push_back({std::move(condition), std::move(body)});
            if (found == "elif") {
                condition = parse_tuple(false);
                continue;
            }
            if (found == "else") {
                expect_block_end();
                node.else_body = parse_until({"endif"}, &found, &open);
            }
            break;
        }
    }

    // `for targets in expr [if cond] %}...{% else %}...{% endfor`, up to the final `%}`.
    void parse_for(Node& node, const OpenBlock& open) {
        std::string found;
        node.kind = NodeKind::kFor;
        node.targets = parse_targets();
        if (!accept_name("in")) fail("expected 'in' in for loop, got " + describe(peek()));
        node.expr = parse_tuple(false);
        if (accept_name("if")) node.condition = parse_expression(true);
        if (is_name("recursive")) fail("recursive for loops are not supported");
        expect_block_end();
        node.body = parse_until({"else", "endfor"}, &found, &open);
        if (found == "else") {
            expect_block_end();
            node.else_body = parse_until({"endfor"}, &found, &open);
        }
    }

    // `set x = expr`, `set ns.attr = expr`, or the block form `set x %}...{% endset`.
    void parse_set(Node& node, const OpenBlock& open) {
        std::string found;
        node.targets = parse_targets();
        if (node.targets.size() == 1 && accept_op(".")) node.text = expect_name();
        if (accept_op("=")) {
            node.kind = NodeKind::kSet;
            node.expr = parse_tuple(true);
        } else {
            if (node.targets.size() != 1 || !node.text.empty()) fail("a block set takes one plain name");
            if (is_op("|")) fail("filters on a block set are not supported");
            node.kind = NodeKind::kSetBlock;
            expect_block_end();
            node.body = parse_until({"endset"}, &found, &open);
        }
    }

    // `macro name(arg, arg=default, ...) %}...{% endmacro`.
    void parse_macro(Node& node, const OpenBlock& open) {
        std::string found;
        node.kind = NodeKind::kMacro;
        node.text = expect_name();
        expect_op("(");
        while (!accept_op(")")) {
            node.targets.push_back(expect_name());
            node.defaults.push_back(accept_op("=") ? parse_expression(true) : nullptr);
            if (!is_op(")")) expect_op(",");
        }
        expect_block_end();
        node.body = parse_until({"endmacro"}, &found, &open);
    }

    // `x`, `a, b` or `(a, b)` as a for/set target.
    std::vector<std::string> parse_targets() {
        std::vector<std::string> names;
        bool paren = accept_op("(");
        do {
            names.push_back(expect_name());
        } while (accept_op(","));
        if (paren) expect_op(")");
        return names;
    }

    // An expression, or a tuple of them when commas follow (`{{ a, b }}`, `set x = 1, 2`).
    ExprPtr parse_tuple(bool allow_condition) {
        int line = peek().line;
        ExprPtr first = parse_expression(allow_condition);
        if (!is_op(",")) return first;
        auto tuple = make(ExprKind::kTuple, line);
        tuple->children.push_back(std::move(first));
        while (accept_op(",")) {
            if (peek().type == TokenType::kBlockEnd || peek().type == TokenType::kVarEnd) break;
            tuple->children.push_back(parse_expression(allow_condition));
        }
        return tuple;
    }

    ExprPtr parse_expression(bool allow_condition) {
        DepthGuard guard(*this);
        return allow_condition ? parse_condition() : parse_or();
    }

    ExprPtr parse_condition() {
        ExprPtr expr = parse_or();
        while (is_name("if")) {
            int line = next().line;
            auto cond = make(ExprKind::kCondition, line);
            cond->children.push_back(parse_or());
            cond->children.push_back(std::move(expr));
            cond->children.push_back(accept_name("else") ? parse_condition() : nullptr);
            expr = std::move(cond);
        }
        return expr;
    }

    ExprPtr binary(ExprKind kind, const std::string& op, ExprPtr left, ExprPtr right, int line) {
        auto e = make(kind, line);
        e->name = op;
        e->children.push_back(std::move(left));
        e->children.push_back(std::move(right));
        return e;
    }

    ExprPtr parse_or() {
        ExprPtr left = parse_and();
        while (is_name("or")) {
            int line = next().line;
            left = binary(ExprKind::kOr, "or", std::move(left), parse_and(), line);
        }
        return left;
    }

    ExprPtr parse_and() {
        ExprPtr left = parse_not();
        while (is_name("and")) {
            int line = next().line;
            left = binary(ExprKind::kAnd, "and", std::move(left), parse_not(), line);
        }
        return left;
    }

    ExprPtr parse_not() {
        DepthGuard guard(*this);
        if (is_name("not")) {
            auto e = make(ExprKind::kUnary, next().line);
            e->name = "not";
            e->children.push_back(parse_not());
            return e;
        }
        return parse_compare();
    }

    ExprPtr parse_compare() {
        int line = peek().line;
        ExprPtr first = parse_math1();
        ExprPtr cmp;
        while (true) {
            std::string op;
            if (peek().type == TokenType::kOp &&
                (is_op("==") || is_op("!=") || is_op("<") || is_op("<=") || is_op(">") || is_op(">="))) {
                op = next().text;
            } else if (is_name("in")) {
                next();
                op = "in";
            } else if (is_name("not") && is_name("in", 1)) {
                next();
                next();
                op = "not in";
            } else {
                break;
            }
            if (!cmp) {
                cmp = make(ExprKind::kCompare, line);
                cmp->children.push_back(std::move(first));
            }
            cmp->ops.push_back(op);
            cmp->children.push_back(parse_math1());
        }
        return cmp ? std::move(cmp) : std::move(first);
    }

    ExprPtr parse_math1() {
        ExprPtr left = parse_concat();
        while (is_op("+") || is_op("-")) {
            const Token& t = next();
            left = binary(ExprKind::kBinary, t.text, std::move(left), parse_concat(), t.line);
        }
        return left;
    }

    ExprPtr parse_concat() {
        ExprPtr left = parse_math2();
        while (is_op("~")) {
            int line = next().line;
            left = binary(ExprKind::kBinary, "~", std::move(left), parse_math2(), line);
        }
        return left;
    }

    ExprPtr parse_math2() {
        ExprPtr left = parse_pow();
        while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
            const Token& t = next();
            left = binary(ExprKind::kBinary, t.text, std::move(left), parse_pow(), t.line);
        }
        return left;
    }

    ExprPtr parse_pow() {
        ExprPtr left = parse_unary(true);
        while (is_op("**")) {
            int line = next().line;
            left = binary(ExprKind::kBinary, "**", std::move(left), parse_unary(true), line);
        }
        return left;
    }

    ExprPtr parse_unary(bool with_filter) {
        DepthGuard guard(*this);
        ExprPtr node;
        if (is_op("-") || is_op("+")) {
            const Token& t = next();
            node = make(ExprKind::kUnary, t.line);
            node->name = t.text;
            node->children.push_back(parse_unary(false));
        } else {
            node = parse_primary();
        }
        node = parse_postfix(std::move(node));
        if (with_filter) node = parse_filter_expr(std::move(node));
        return node;
    }

    ExprPtr literal(Value v, int line) {
        auto e = make(ExprKind::kLiteral, line);
        e->literal = std::move(v);
        return e;
    }

    ExprPtr parse_primary() {
        const Token& t = peek();
        int line = t.line;
        switch (t.type) {
            case TokenType::kName: {
                next();
                if (t.text == "true" || t.text == "True") return literal(Value::boolean(true), line);
                if (t.text == "false" || t.text == "False") return literal(Value::boolean(false), line);
                if (t.text == "none" || t.text == "None") return literal(Value::none(), line);
                auto e = make(ExprKind::kName, line);
                e->name = t.text;
                return e;
            }
            case TokenType::kString: {
                std::string s;
                while (peek().type == TokenType::kString) s += next().text;  // adjacent literals join
                return literal(Value::string(std::move(s)), line);
            }
            case TokenType::kInt: {
                next();
                errno = 0;
                long long v = std::strtoll(t.text.c_str(), nullptr, 10);
                if (errno == ERANGE) fail("integer literal out of range: " + t.text);
                return literal(Value::integer(v), line);
            }
            case TokenType::kFloat:
                next();
                return literal(Value::number(std::strtod(t.text.c_str(), nullptr)), line);
            case TokenType::kOp:
                if (t.text == "(") {
                    next();
                    if (accept_op(")")) return make(ExprKind::kTuple, line);
                    ExprPtr first = parse_expression(true);
                    if (accept_op(")")) return first;
                    auto tuple = make(ExprKind::kTuple, line);
                    tuple->children.push_back(std::move(first));
                    while (accept_op(",")) {
                        if (is_op(")")) break;
                        tuple->children.push_back(parse_expression(true));
                    }
                    expect_op(")");
                    return tuple;
                }
                if (t.text == "[") {
                    next();
                    auto list = make(ExprKind::kList, line);
                    while (!accept_op("]")) {
                        list->children.push_back(parse_expression(true));
                        if (!is_op("]")) expect_op(",");
                    }
                    return list;
                }
                if (t.text == "{") {
                    next();
                    auto dict = make(ExprKind::kDict, line);
                    while (!accept_op("}")) {
                        dict->children.push_back(parse_expression(true));
                        expect_op(":");
                        dict->children.push_back(parse_expression(true));
                        if (!is_op("}")) expect_op(",");
                    }
                    return dict;
                }
                break;
            default: break;
        }
        fail("unexpected " + describe(t));
    }

    ExprPtr parse_postfix(ExprPtr node) {
        while (true) {
            if (is_op(".")) {
                int line = next().line;
                if (peek().type == TokenType::kInt) {
                    auto item = make(ExprKind::kItem, line);
                    item->children.push_back(std::move(node));
                    item->children.push_back(literal(Value::integer(std::atoll(next().text.c_str())), line));
                    node = std::move(item);
                } else {
                    auto attr = make(ExprKind::kAttr, line);
                    attr->name = expect_name();
                    attr->children.push_back(std::move(node));
                    node = std::move(attr);
                }
            } else if (is_op("[")) {
                node = parse_subscript(std::move(node));
            } else if (is_op("(")) {
                node = parse_call(std::move(node));
            } else {
                return node;
            }
        }
    }

    ExprPtr parse_subscript(ExprPtr node) {
        int line = next().line;  // [
        ExprPtr start;
        if (!is_op(":")) start = parse_expression(true);
        if (!accept_op(":")) {
            expect_op("]");
            auto item = make(ExprKind::kItem, line);
            item->children.push_back(std::move(node));
            item->children.push_back(std::move(start));
            return item;
        }
        auto slice = make(ExprKind::kSlice, line);
        slice->children.push_back(std::move(node));
        slice->children.push_back(std::move(start));
        slice->children.push_back(is_op(":") || is_op("]") ? nullptr : parse_expression(true));
        ExprPtr step;
        if (accept_op(":") && !is_op("]")) step = parse_expression(true);
        slice->children.push_back(std::move(step));
        expect_op("]");
        return slice;
    }

    // (args, name=value, ...) appended to `call`.
    void parse_args(Expr& call) {
        expect_op("(");
        while (!accept_op(")")) {
            if (peek().type == TokenType::kName && is_op("=", 1)) {
                std::string key = next().text;
                next();
                call.kwargs.emplace_back(key, parse_expression(true));
            } else {
                if (!call.kwargs.empty()) fail("positional argument after keyword argument");
                call.children.push_back(parse_expression(true));
            }
            if (!is_op(")")) expect_op(",");
        }
    }

    ExprPtr parse_call(ExprPtr node) {
        auto call = make(ExprKind::kCall, peek().line);
        call->children.push_back(std::move(node));
        parse_args(*call);
        return call;
    }

    ExprPtr parse_filter_expr(ExprPtr node) {
        while (true) {
            if (is_op("|")) {
                int line = next().line;
                auto filter = make(ExprKind::kFilter, line);
                filter->name = expect_name();
                if (!is_known_filter(filter->name)) fail("no filter named '" + filter->name + "'", line);
                filter->children.push_back(std::move(node));
                if (is_op("(")) parse_args(*filter);
                node = std::move(filter);
            } else if (is_name("is")) {
                int line = next().line;
                auto test = make(ExprKind::kTest, line);
                test->negated = accept_name("not");
                test->name = expect_name();
                if (!is_known_test(test->name)) fail("no test named '" + test->name + "'", line);
                test->children.push_back(std::move(node));
                const Token& t = peek();
                bool starts_arg = t.type == TokenType::kName || t.type == TokenType::kString ||
                                  t.type == TokenType::kInt || t.type == TokenType::kFloat || is_op("(") ||
                                  is_op("[") || is_op("{");
                if (is_op("(")) {
                    parse_args(*test);
                } else if (starts_arg && !is_name("else") && !is_name("or") && !is_name("and")) {
                    if (is_name("is")) fail("tests cannot be chained with 'is'");
                    test->children.push_back(parse_postfix(parse_primary()));
                }
                node = std::move(test);
            } else if (is_op("(")) {
                node = parse_call(std::move(node));
            } else {
                return node;
            }
        }
    }

    const std::vector<Token>& tokens_;
    size_t pos_ = 0;
    int depth_ = 0;
};

}  // namespace

Body parse(const std::vector<Token>& tokens) {
    return Parser(tokens).parse_template();
}

}  // namespace surf::model::jinja
