// SPDX-License-Identifier: MIT
// A minimal ERC-20 for xgr's chain tests: the deployer receives the whole
// supply. Also exposes a tuple getter (info) and an array getter (holders)
// so contract-read rules can be tested on multi-slot and indexed results.
pragma solidity ^0.8.0;

contract TestToken {
    event Transfer(address indexed from, address indexed to, uint256 value);
    event Approval(address indexed owner, address indexed spender, uint256 value);

    string public name;
    string public symbol;
    uint8 public constant decimals = 18;
    uint256 public totalSupply;
    mapping(address => uint256) public balanceOf;
    mapping(address => mapping(address => uint256)) public allowance;
    address[] private holderList;

    constructor(string memory name_, string memory symbol_, uint256 supply) {
        name = name_;
        symbol = symbol_;
        totalSupply = supply;
        balanceOf[msg.sender] = supply;
        holderList.push(msg.sender);
        emit Transfer(address(0), msg.sender, supply);
    }

    function transfer(address to, uint256 value) external returns (bool) {
        _move(msg.sender, to, value);
        return true;
    }

    function approve(address spender, uint256 value) external returns (bool) {
        allowance[msg.sender][spender] = value;
        emit Approval(msg.sender, spender, value);
        return true;
    }

    function transferFrom(address from, address to, uint256 value) external returns (bool) {
        uint256 allowed = allowance[from][msg.sender];
        require(allowed >= value, "ERC20: insufficient allowance");
        allowance[from][msg.sender] = allowed - value;
        _move(from, to, value);
        return true;
    }

    /// Multi-slot read: (name, symbol, decimals, totalSupply, holders).
    function info() external view returns (string memory, string memory, uint8, uint256, address[] memory) {
        return (name, symbol, decimals, totalSupply, holderList);
    }

    function holders() external view returns (address[] memory) {
        return holderList;
    }

    /// Always reverts with Error(reason): the revert path of contract reads.
    function fail(string calldata reason) external pure returns (uint256) {
        revert(reason);
    }

    function _move(address from, address to, uint256 value) private {
        require(to != address(0), "ERC20: transfer to zero");
        require(balanceOf[from] >= value, "ERC20: insufficient balance");
        balanceOf[from] -= value;
        if (balanceOf[to] == 0 && value != 0) {
            holderList.push(to);
        }
        balanceOf[to] += value;
        emit Transfer(from, to, value);
    }
}
