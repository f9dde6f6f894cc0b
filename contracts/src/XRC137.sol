// SPDX-License-Identifier: MIT
// xgr's own XRC-137 rule container: the interface and events of
// XRC-137_Smart_Contract_Standard.md §4.1, executor extension included.
// getRule() returns the exact stored string; an XGR1 envelope requires
// encryption metadata (rid != 0), plain JSON clears it.
pragma solidity ^0.8.0;

contract XRC137 {
    struct EncInfo {
        bytes32 rid;
        string suite;
        bytes encDEK;
    }

    event RuleUpdated(string newRule);
    event EncryptedSet(bytes32 rid, string suite);
    event EncryptedCleared();
    event ExecutorAdded(address indexed executor);
    event ExecutorRemoved(address indexed executor);
    event OwnershipTransferred(address indexed previousOwner, address indexed newOwner);

    string private ruleJson;
    string public constant nameXRC = "XGR_XRC137";
    EncInfo public encrypted;
    address public owner;

    address[] private executorList;
    mapping(address => uint256) private execIndex; // position + 1 in executorList

    modifier onlyOwner() {
        require(msg.sender == owner, "XRC137: not owner");
        _;
    }

    constructor(string memory jsonRule) {
        owner = msg.sender;
        require(!_isEnvelope(jsonRule), "XRC137: envelope needs setRuleAndEncrypted");
        ruleJson = jsonRule;
        emit OwnershipTransferred(address(0), msg.sender);
        emit RuleUpdated(jsonRule);
    }

    function getRule() external view returns (string memory) {
        return ruleJson;
    }

    function getNameXRC() external pure returns (string memory) {
        return nameXRC;
    }

    function isEncrypted() public view returns (bool) {
        return encrypted.rid != bytes32(0);
    }

    function updateRule(string memory jsonOrBlob) external onlyOwner {
        if (_isEnvelope(jsonOrBlob)) {
            require(isEncrypted(), "XRC137: envelope without encryption metadata");
        } else if (isEncrypted()) {
            delete encrypted;
            emit EncryptedCleared();
        }
        ruleJson = jsonOrBlob;
        emit RuleUpdated(jsonOrBlob);
    }

    function setRuleAndEncrypted(
        string calldata jsonOrBlob,
        bytes32 rid,
        string calldata suite,
        bytes calldata encDEK
    ) external onlyOwner {
        if (rid == bytes32(0)) {
            require(!_isEnvelope(jsonOrBlob), "XRC137: envelope without rid");
            if (isEncrypted()) {
                delete encrypted;
                emit EncryptedCleared();
            }
        } else {
            encrypted = EncInfo(rid, suite, encDEK);
            emit EncryptedSet(rid, suite);
        }
        ruleJson = jsonOrBlob;
        emit RuleUpdated(jsonOrBlob);
    }

    function transferOwnership(address newOwner) external onlyOwner {
        require(newOwner != address(0), "XRC137: zero owner");
        if (execIndex[newOwner] != 0) {
            _removeExecutor(newOwner);
        }
        address previous = owner;
        owner = newOwner;
        emit OwnershipTransferred(previous, newOwner);
    }

    function addExecutor(address exec) external onlyOwner {
        require(exec != address(0), "XRC137: zero executor");
        require(exec != owner, "XRC137: owner is implicit");
        if (execIndex[exec] != 0) {
            return;
        }
        executorList.push(exec);
        execIndex[exec] = executorList.length;
        emit ExecutorAdded(exec);
    }

    function removeExecutor(address exec) external onlyOwner {
        if (execIndex[exec] == 0) {
            return;
        }
        _removeExecutor(exec);
    }

    function getExecutorList() external view returns (address[] memory) {
        return executorList;
    }

    function _removeExecutor(address exec) private {
        uint256 pos = execIndex[exec] - 1;
        uint256 last = executorList.length - 1;
        if (pos != last) {
            address moved = executorList[last];
            executorList[pos] = moved;
            execIndex[moved] = pos + 1;
        }
        executorList.pop();
        delete execIndex[exec];
        emit ExecutorRemoved(exec);
    }

    function _isEnvelope(string memory s) private pure returns (bool) {
        bytes memory b = bytes(s);
        return b.length >= 4 && b[0] == "X" && b[1] == "G" && b[2] == "R" && b[3] == "1";
    }
}
