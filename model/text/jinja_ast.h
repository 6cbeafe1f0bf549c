// Tokens and syntax tree of the Jinja interpreter (jinja.h). Internal to model/jinja*.cpp.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "model/text/jinja_value.h"

namespace surf::model::jinja {

// Lexer settings: Hugging Face renders chat templates with trim_blocks and lstrip_blocks on and
// keep_trailing_newline off.
struct LexerOptions {
    bool trim_blocks = true;
    bool lstrip_blocks = true;
    bool keep_trailing_newline = false;
};

enum class TokenType {
    kData,
    kVarBegin,
    kVarEnd,
    kBlockBegin,
    kBlockEnd,
    kName,
    kString,
    kInt,
    kFloat,
    kOp,
    kEof
};

struct Token {
    TokenType type;
    std::string text;  // data text, name, decoded string literal, number text or operator
    int line;
};

// Splits a template into data and tag tokens, applying whitespace control. Throws TemplateError with
// the line of an unclosed tag/comment or a bad character.
std::vector<Token> tokenize(const std::string& source, const LexerOptions& options);

enum class ExprKind {
    kLiteral,    // literal
    kName,       // name
    kList,       // children = items
    kTuple,      // children = items
    kDict,       // children = key0, value0, key1, value1, ...
    kAttr,       // children[0].name
    kItem,       // children[0][children[1]]
    kSlice,      // children[0][children[1]:children[2]:children[3]], null = omitted
    kCall,       // children[0](children[1..], kwargs)
    kFilter,     // children[0] | name(children[1..], kwargs)
    kTest,       // children[0] is [not] name(children[1..])
    kUnary,      // name = "-", "+" or "not"
    kBinary,     // name = "+", "-", "*", "/", "//", "%", "**", "~"
    kAnd,        // children[0] and children[1]
    kOr,         // children[0] or children[1]
    kCompare,    // children[0] ops[0] children[1] ops[1] children[2] ... (chained like Python)
    kCondition,  // children[1] if children[0] else children[2] (children[2] null = Undefined)
};

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
    ExprKind kind;
    int line = 0;
    std::string name;
    Value literal;
    std::vector<ExprPtr> children;
    std::vector<std::string> ops;
    std::vector<std::pair<std::string, ExprPtr>> kwargs;
    bool negated = false;
};

enum class NodeKind {
    kText,      // text
    kOutput,    // {{ expr }}
    kIf,        // branches, else_body
    kFor,       // targets in expr [if condition] body [else else_body]
    kSet,       // targets (or targets[0].attribute) = expr
    kSetBlock,  // {% set targets[0] %}body{% endset %}
    kMacro,     // {% macro name(targets = defaults) %}body{% endmacro %}
    kBreak,
    kContinue,
    kScope,  // a block rendered in place (HF's {% generation %})
};

struct Node;
using Body = std::vector<std::unique_ptr<Node>>;

struct Branch {
    ExprPtr condition;
    Body body;
};

struct Node {
    NodeKind kind;
    int line = 0;
    std::string text;   // kText; kMacro: macro name; kSet: attribute of a namespace target
    ExprPtr expr;       // kOutput, kFor (iterable), kSet (value)
    ExprPtr condition;  // kFor filter
    std::vector<std::string> targets;
    std::vector<ExprPtr> defaults;  // kMacro: one per target, null = required
    std::vector<Branch> branches;   // kIf
    Body body;
    Body else_body;
};

// Parses tokens into a template body. Throws TemplateError (with line) on a syntax error, an unknown
// filter or test, or an unsupported statement.
Body parse(const std::vector<Token>& tokens);

bool is_known_filter(const std::string& name);
bool is_known_test(const std::string& name);

}  // namespace surf::model::jinja
