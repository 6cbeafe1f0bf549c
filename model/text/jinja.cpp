// Jinja renderer: walks the statement tree (jinja_ast.h) with jinja2's scoping rules: a for loop
// gives every iteration a fresh scope over the enclosing one (so `set` inside a loop does not leak;
// templates use namespace() for that), `if` opens no scope, a macro call runs in a scope over the
// one it was defined in.
#include "model/text/jinja.h"

#include <algorithm>
#include <chrono>

#include "base/error.h"
#include "model/text/jinja_ast.h"
#include "model/text/jinja_builtins.h"

namespace surf::model {

using namespace jinja;

namespace {

constexpr int kMaxCallDepth =
    256;  // macro recursion limit: bad templates fail instead of overflowing the stack
// A chat template renders a conversation in thousands of steps (statements and loop iterations) and a few
// hundred kilobytes; these bounds stop a template that would hang or exhaust memory (nested range loops)
// with an error instead.
constexpr int64_t kMaxSteps = 4'000'000;
constexpr double kMaxSeconds = 10.0;
constexpr size_t kMaxOutputBytes = size_t{64} << 20;

struct Frame {
    Dict vars;
    std::shared_ptr<Frame> parent;
};
using FramePtr = std::shared_ptr<Frame>;

enum class Flow { kNormal, kBreak, kContinue };

template <typename Json>
Value from_json(const Json& j) {
    switch (j.type()) {
        case Json::value_t::null: return Value::none();
        case Json::value_t::boolean: return Value::boolean(j.template get<bool>());
        case Json::value_t::number_integer: return Value::integer(j.template get<int64_t>());
        case Json::value_t::number_unsigned: return Value::integer(int64_t(j.template get<uint64_t>()));
        case Json::value_t::number_float: return Value::number(j.template get<double>());
        case Json::value_t::string: return Value::string(j.template get<std::string>());
        case Json::value_t::array: {
            ValueList items;
            for (const auto& item : j) items.push_back(from_json(item));
            return Value::list(std::move(items));
        }
        case Json::value_t::object: {
            Dict d;
            for (auto it = j.begin(); it != j.end(); ++it)
                d.entries.emplace_back(it.key(), from_json(it.value()));
            return Value::dict(std::move(d));
        }
        default: return Value::none();
    }
}

class Renderer {
public:
    explicit Renderer(FramePtr root) : root_(std::move(root)) {}

    Flow render(const Body& body, const FramePtr& frame, std::string& out) {
        for (const auto& node : body) {
            Flow flow = render_node(*node, frame, out);
            if (flow != Flow::kNormal) return flow;
        }
        return Flow::kNormal;
    }

private:
    Flow render_node(const Node& node, const FramePtr& frame, std::string& out) {
        tick();
        if (out.size() > kMaxOutputBytes) {
            throw TemplateError("the output grew past " + std::to_string(kMaxOutputBytes >> 20) + " MiB");
        }
        try {
            return render_node_impl(node, frame, out);
        } catch (TemplateError& e) {
            if (e.line == 0) e.line = node.line;
            throw;
        }
    }

    Flow render_node_impl(const Node& node, const FramePtr& frame, std::string& out) {
        switch (node.kind) {
            case NodeKind::kText: out += node.text; return Flow::kNormal;
            case NodeKind::kOutput: out += to_str(eval(*node.expr, frame)); return Flow::kNormal;
            case NodeKind::kIf:
                for (const Branch& branch : node.branches) {
                    if (eval(*branch.condition, frame).truthy()) return render(branch.body, frame, out);
                }
                return render(node.else_body, frame, out);
            case NodeKind::kFor: render_for(node, frame, out); return Flow::kNormal;
            case NodeKind::kSet: assign(node, eval(*node.expr, frame), frame); return Flow::kNormal;
            case NodeKind::kSetBlock: {
                std::string captured;
                render(node.body, frame, captured);
                frame->vars.set(node.targets[0], Value::string(std::move(captured)));
                return Flow::kNormal;
            }
            case NodeKind::kMacro: frame->vars.set(node.text, make_macro(node, frame)); return Flow::kNormal;
            case NodeKind::kBreak: return Flow::kBreak;
            case NodeKind::kContinue: return Flow::kContinue;
            case NodeKind::kScope: return render(node.body, frame, out);
        }
        return Flow::kNormal;
    }

    static void bind_targets(const std::vector<std::string>& targets, const Value& value, Frame& frame) {
        if (targets.size() == 1) {
            frame.vars.set(targets[0], value);
            return;
        }
        ValueList items = iterate(value);
        if (items.size() != targets.size()) {
            throw TemplateError("cannot unpack " + std::to_string(items.size()) + " values into " +
                                std::to_string(targets.size()) + " names");
        }
        for (size_t i = 0; i < targets.size(); ++i) frame.vars.set(targets[i], items[i]);
    }

    void assign(const Node& node, const Value& value, const FramePtr& frame) {
        if (node.text.empty()) {
            bind_targets(node.targets, value, *frame);
            return;
        }
        Value target = lookup(node.targets[0], frame);
        if (!target.is_namespace()) {
            throw TemplateError("cannot assign attribute '" + node.text + "' on '" + node.targets[0] +
                                "': it is not a namespace()");
        }
        target.mutable_dict().set(node.text, value);
    }

    void render_for(const Node& node, const FramePtr& frame, std::string& out) {
        ValueList items = iterate(eval(*node.expr, frame));
        if (node.condition) {
            ValueList kept;
            for (const Value& item : items) {
                auto probe = std::make_shared<Frame>(Frame{{}, frame});
                bind_targets(node.targets, item, *probe);
                if (eval(*node.condition, probe).truthy()) kept.push_back(item);
            }
            items = std::move(kept);
        }
        if (items.empty()) {
            render(node.else_body, frame, out);
            return;
        }
        int64_t n = int64_t(items.size());
        for (int64_t i = 0; i < n; ++i) {
            auto scope = std::make_shared<Frame>(Frame{{}, frame});
            Dict loop;
            loop.set("index0", Value::integer(i));
            loop.set("index", Value::integer(i + 1));
            loop.set("revindex0", Value::integer(n - i - 1));
            loop.set("revindex", Value::integer(n - i));
            loop.set("first", Value::boolean(i == 0));
            loop.set("last", Value::boolean(i == n - 1));
            loop.set("length", Value::integer(n));
            loop.set("depth", Value::integer(1));
            loop.set("depth0", Value::integer(0));
            loop.set("previtem",
                     i > 0 ? items[size_t(i - 1)] : Value::undefined("there is no previous item"));
            loop.set("nextitem",
                     i + 1 < n ? items[size_t(i + 1)] : Value::undefined("there is no next item"));
            loop.set("cycle", Value::callable("loop.cycle", [i](CallArgs& call) {
                         if (call.positional.empty()) throw TemplateError("no items for cycling given");
                         return call.positional[size_t(i) % call.positional.size()];
                     }));
            scope->vars.set("loop", Value::dict(std::move(loop)));
            bind_targets(node.targets, items[size_t(i)], *scope);
            tick();
            if (render(node.body, scope, out) == Flow::kBreak) break;
        }
    }

    Value make_macro(const Node& node, const FramePtr& frame) {
        const Node* macro = &node;
        std::weak_ptr<Frame> defined_in = frame;
        return Value::callable(node.text, [this, macro, defined_in](CallArgs& call) {
            FramePtr parent = defined_in.lock();
            if (!parent) throw TemplateError("macro '" + macro->text + "' called after its scope ended");
            if (call.positional.size() > macro->targets.size()) {
                throw TemplateError("macro '" + macro->text + "' takes " +
                                    std::to_string(macro->targets.size()) + " arguments, got " +
                                    std::to_string(call.positional.size()));
            }
            auto scope = std::make_shared<Frame>(Frame{{}, parent});
            for (size_t i = 0; i < macro->targets.size(); ++i) {
                const std::string& param = macro->targets[i];
                Value value;
                bool given = false;
                if (i < call.positional.size()) {
                    value = call.positional[i];
                    given = true;
                }
                for (const auto& [key, v] : call.keyword) {
                    if (key == param) {
                        value = v;
                        given = true;
                    }
                }
                if (!given && macro->defaults[i]) value = eval(*macro->defaults[i], scope);
                if (!given && !macro->defaults[i])
                    value = Value::undefined("parameter '" + param + "' was not provided");
                scope->vars.set(param, value);
            }
            for (const auto& [key, v] : call.keyword) {
                if (std::find(macro->targets.begin(), macro->targets.end(), key) == macro->targets.end()) {
                    throw TemplateError("macro '" + macro->text + "' takes no keyword argument '" + key +
                                        "'");
                }
            }
            if (++depth_ > kMaxCallDepth)
                throw TemplateError("macro recursion deeper than " + std::to_string(kMaxCallDepth));
            std::string out;
            render(macro->body, scope, out);
            --depth_;
            return Value::string(std::move(out));
        });
    }

    Value lookup(const std::string& name, const FramePtr& frame) const {
        for (const Frame* f = frame.get(); f; f = f->parent.get()) {
            if (const Value* v = f->vars.find(name)) return *v;
        }
        return lookup_global(name);
    }

    Value eval(const Expr& e, const FramePtr& frame) {
        try {
            return eval_impl(e, frame);
        } catch (TemplateError& err) {
            if (err.line == 0) err.line = e.line;
            throw;
        }
    }

    Value eval_optional(const ExprPtr& e, const FramePtr& frame) { return e ? eval(*e, frame) : Value(); }

    CallArgs eval_args(const Expr& e, size_t first, const FramePtr& frame) {
        CallArgs args;
        for (size_t i = first; i < e.children.size(); ++i)
            args.positional.push_back(eval(*e.children[i], frame));
        for (const auto& [key, value] : e.kwargs) args.keyword.emplace_back(key, eval(*value, frame));
        return args;
    }

    Value eval_impl(const Expr& e, const FramePtr& frame) {
        switch (e.kind) {
            case ExprKind::kLiteral: return e.literal;
            case ExprKind::kName: return lookup(e.name, frame);
            case ExprKind::kList:
            case ExprKind::kTuple: {
                ValueList items;
                for (const auto& child : e.children) items.push_back(eval(*child, frame));
                return Value::list(std::move(items), e.kind == ExprKind::kTuple);
            }
            case ExprKind::kDict: return eval_dict(e, frame);
            case ExprKind::kAttr: return get_attribute(eval(*e.children[0], frame), e.name);
            case ExprKind::kItem: return get_item(eval(*e.children[0], frame), eval(*e.children[1], frame));
            case ExprKind::kSlice:
                return get_slice(eval(*e.children[0], frame), eval_optional(e.children[1], frame),
                                 eval_optional(e.children[2], frame), eval_optional(e.children[3], frame));
            case ExprKind::kCall: return eval_call(e, frame);
            case ExprKind::kFilter: {
                Value subject = eval(*e.children[0], frame);
                CallArgs args = eval_args(e, 1, frame);
                return apply_filter(e.name, subject, args);
            }
            case ExprKind::kTest: {
                Value subject = eval(*e.children[0], frame);
                CallArgs args = eval_args(e, 1, frame);
                return Value::boolean(apply_test(e.name, subject, args) != e.negated);
            }
            case ExprKind::kUnary: return eval_unary(e, frame);
            case ExprKind::kBinary:
                return binary_op(e.name, eval(*e.children[0], frame), eval(*e.children[1], frame));
            case ExprKind::kAnd: {
                Value left = eval(*e.children[0], frame);
                return left.truthy() ? eval(*e.children[1], frame) : left;
            }
            case ExprKind::kOr: {
                Value left = eval(*e.children[0], frame);
                return left.truthy() ? left : eval(*e.children[1], frame);
            }
            case ExprKind::kCompare: return eval_compare(e, frame);
            case ExprKind::kCondition:
                if (eval(*e.children[0], frame).truthy()) return eval(*e.children[1], frame);
                return e.children[2] ? eval(*e.children[2], frame) : Value::undefined();
        }
        return Value();
    }

    // `{k: v, ...}`: children alternate key, value; keys must be strings.
    Value eval_dict(const Expr& e, const FramePtr& frame) {
        Dict d;
        for (size_t i = 0; i + 1 < e.children.size(); i += 2) {
            Value key = eval(*e.children[i], frame);
            if (!key.is_string())
                throw TemplateError(std::string("dict keys must be strings, got ") + key.type_name());
            d.set(key.as_string(), eval(*e.children[i + 1], frame));
        }
        return Value::dict(std::move(d));
    }

    // `f(args)`: the callee and all arguments are evaluated before the callee is checked.
    Value eval_call(const Expr& e, const FramePtr& frame) {
        Value callee = eval(*e.children[0], frame);
        CallArgs args = eval_args(e, 1, frame);
        if (callee.is_undefined()) fail_undefined(callee);
        if (!callee.is_callable())
            throw TemplateError(std::string("'") + callee.type_name() + "' object is not callable");
        return callee.as_callable().fn(args);
    }

    // `not x`, `-x`, `+x`.
    Value eval_unary(const Expr& e, const FramePtr& frame) {
        Value v = eval(*e.children[0], frame);
        if (e.name == "not") return Value::boolean(!v.truthy());
        if (v.is_undefined()) fail_undefined(v);
        if (!v.is_number())
            throw TemplateError(std::string("bad operand type for unary ") + e.name + ": '" + v.type_name() +
                                "'");
        if (e.name == "+") return v.is_bool() ? Value::integer(v.as_int()) : v;
        return v.is_float() ? Value::number(-v.as_double()) : Value::integer(-v.as_int());
    }

    // A comparison chain `a < b <= c`: operands are evaluated left to right and the chain stops at the
    // first false link, as in Python.
    Value eval_compare(const Expr& e, const FramePtr& frame) {
        Value left = eval(*e.children[0], frame);
        for (size_t i = 0; i < e.ops.size(); ++i) {
            Value right = eval(*e.children[i + 1], frame);
            const std::string& op = e.ops[i];
            bool ok;
            if (op == "==")
                ok = equals(left, right);
            else if (op == "!=")
                ok = !equals(left, right);
            else if (op == "in")
                ok = contains(right, left);
            else if (op == "not in")
                ok = !contains(right, left);
            else {
                if (left.is_undefined()) fail_undefined(left);
                if (right.is_undefined()) fail_undefined(right);
                int c = compare(left, right);
                ok = op == "<" ? c < 0 : op == "<=" ? c <= 0 : op == ">" ? c > 0 : c >= 0;
            }
            if (!ok) return Value::boolean(false);
            left = std::move(right);
        }
        return Value::boolean(true);
    }

    // One step of work: a statement or a loop iteration. Throws past the step or time budget.
    void tick() {
        if (++steps_ > kMaxSteps) {
            throw TemplateError("the template ran more than " + std::to_string(kMaxSteps) +
                                " steps (a loop far longer than a chat needs)");
        }
        if ((steps_ & 1023) == 0 &&
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count() > kMaxSeconds) {
            throw TemplateError("the template ran longer than " + std::to_string(int(kMaxSeconds)) + " s");
        }
    }

    FramePtr root_;
    int depth_ = 0;
    int64_t steps_ = 0;
    std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

}  // namespace

struct JinjaTemplate::Impl {
    Body body;
};

JinjaTemplate::JinjaTemplate(const std::string& source, std::string name)
    : name_(std::move(name)), impl_(std::make_unique<Impl>()) {
    try {
        impl_->body = parse(tokenize(source, LexerOptions{}));
    } catch (const TemplateError& e) {
        throw Error(ErrorKind::kFormat, name_ + ":" + std::to_string(e.line) + ": " + e.what());
    }
}

JinjaTemplate::~JinjaTemplate() = default;
JinjaTemplate::JinjaTemplate(JinjaTemplate&&) noexcept = default;
JinjaTemplate& JinjaTemplate::operator=(JinjaTemplate&&) noexcept = default;

namespace {

template <typename Json>
std::string render_with(const Body& body, const std::string& name, const Json& variables) {
    if (!variables.is_object()) {
        throw Error(ErrorKind::kInvalidArgument, name + ": template variables must be a JSON object");
    }
    auto root = std::make_shared<Frame>();
    for (auto it = variables.begin(); it != variables.end(); ++it)
        root->vars.set(it.key(), from_json(it.value()));
    Renderer renderer(root);
    std::string out;
    try {
        renderer.render(body, root, out);
    } catch (const TemplateError& e) {
        throw Error(ErrorKind::kInvalidArgument, name + ":" + std::to_string(e.line) + ": " + e.what());
    } catch (const std::bad_variant_access&) {
        throw Error(ErrorKind::kInvalidArgument, name + ": a value of the wrong type was used");
    }
    return out;
}

}  // namespace

std::string JinjaTemplate::render(const nlohmann::ordered_json& variables) const {
    return render_with(impl_->body, name_, variables);
}

std::string JinjaTemplate::render(const nlohmann::json& variables) const {
    return render_with(impl_->body, name_, variables);
}

}  // namespace surf::model
